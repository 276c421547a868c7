/*
 * test_route_readers.c - the control plane's reply readers
 * (src/valkey/control.h), which the blocking path and the async API share,
 * on replies made by hand: a redirection's slot and endpoint, a sentinel's
 * address of the master, a node's ROLE.
 *
 *   MOVED / ASK       slot, host (an IPv6 one too: the port is after the
 *                     last ':') and port; anything else, or a slot or port
 *                     out of range, is no redirection (-1)
 *   GET-MASTER-ADDR   an address; nil: SLUICE_ECONFIG (no such master);
 *                     a bad port, an empty or too long host, no array:
 *                     SLUICE_EPROTO; an error reply: the sentinel's error
 *                     (NOAUTH: SLUICE_EAUTH)
 *   ROLE              "master": 0; "slave": SLUICE_ECONN (a failover in
 *                     progress); no role: SLUICE_EPROTO
 */
#include "test.h"
#include "valkey/control.h"

#include <stdio.h>
#include <string.h>

/* A reply of 'type' holding the text 's' (a string, error or status). */
static redisReply text_reply(int type, const char *s)
{
    redisReply r;

    memset(&r, 0, sizeof(r));
    r.type = type;
    r.str = (char *)s;
    r.len = strlen(s);
    return r;
}

static int parse(const char *s, bool *ask, unsigned *slot, char *host,
                 int *port)
{
    redisReply r = text_reply(REDIS_REPLY_ERROR, s);
    const char *h;
    size_t hl;
    int rc = sluice__vk_redirect_parse(&r, ask, slot, &h, &hl, port);

    if (rc == 0)
        snprintf(host, 64, "%.*s", (int)hl, h);
    return rc;
}

static void test_redirects(void)
{
    static const char *const bad[] = {
        "MOVED", "MOVED 12", "MOVED 12 127.0.0.1", "MOVED x 127.0.0.1:7000",
        "MOVED 16384 127.0.0.1:7000", "MOVED 12 127.0.0.1:0",
        "MOVED 12 127.0.0.1:65536", "MOVED 12 :7000", "ASKING 1 h:2",
        "ERR MOVED 12 127.0.0.1:7000", "TRYAGAIN Multiple keys request",
    };
    char host[64];
    unsigned slot = 0;
    bool ask = true;
    int port = 0;

    test_context("redirect_parse");
    CHECK_OK(parse("MOVED 3999 127.0.0.1:6381", &ask, &slot, host, &port));
    CHECK(!ask && slot == 3999 && strcmp(host, "127.0.0.1") == 0 &&
          port == 6381);
    CHECK_OK(parse("ASK 16383 ::1:7001", &ask, &slot, host, &port));
    CHECK(ask && slot == 16383 && strcmp(host, "::1") == 0 && port == 7001);
    CHECK_OK(parse("MOVED 0 node-a.internal:1", &ask, &slot, host, &port));
    CHECK(!ask && slot == 0 && strcmp(host, "node-a.internal") == 0 &&
          port == 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        test_context("redirect_parse: '%s'", bad[i]);
        CHECK(parse(bad[i], &ask, &slot, host, &port) == -1);
    }
    {
        redisReply r = text_reply(REDIS_REPLY_STATUS, "MOVED 1 h:2");
        const char *h;
        size_t hl;

        test_context("redirect_parse: a status reply");
        CHECK(sluice__vk_redirect_parse(&r, &ask, &slot, &h, &hl, &port) ==
              -1);
    }
    test_context(NULL);
}

/* The store and nodes the readers name in their messages. */
static sluice__vk_store store;
static sluice__vk_node *sentinel, *node;

static int addr(redisReply *r, char *host, size_t cap, int *port)
{
    return sluice__vk_sentinel_addr_parse(&store, sentinel, r, host, cap,
                                          port);
}

static void test_sentinel_addr(void)
{
    redisReply h = text_reply(REDIS_REPLY_STRING, "127.0.0.1");
    redisReply p = text_reply(REDIS_REPLY_STRING, "6390");
    redisReply *el[2] = {&h, &p};
    redisReply arr, nil, err;
    char host[16];
    int port = 0;

    test_context("sentinel_addr_parse");
    memset(&arr, 0, sizeof(arr));
    arr.type = REDIS_REPLY_ARRAY;
    arr.elements = 2;
    arr.element = el;
    CHECK_OK(addr(&arr, host, sizeof(host), &port));
    CHECK(strcmp(host, "127.0.0.1") == 0 && port == 6390);
    /* A host that does not fit, a bad port, an empty host. */
    CHECK_RC(addr(&arr, host, 9, &port), SLUICE_EPROTO);
    p = text_reply(REDIS_REPLY_STRING, "65536");
    CHECK_RC(addr(&arr, host, sizeof(host), &port), SLUICE_EPROTO);
    p = text_reply(REDIS_REPLY_STRING, "63x");
    CHECK_RC(addr(&arr, host, sizeof(host), &port), SLUICE_EPROTO);
    p = text_reply(REDIS_REPLY_STRING, "6390");
    h = text_reply(REDIS_REPLY_STRING, "");
    CHECK_RC(addr(&arr, host, sizeof(host), &port), SLUICE_EPROTO);
    arr.elements = 1;
    CHECK_RC(addr(&arr, host, sizeof(host), &port), SLUICE_EPROTO);
    memset(&nil, 0, sizeof(nil));
    nil.type = REDIS_REPLY_NIL;
    CHECK_RC(addr(&nil, host, sizeof(host), &port), SLUICE_ECONFIG);
    CHECK(strstr(sluice_last_error(), "sluice-master") != NULL);
    err = text_reply(REDIS_REPLY_ERROR, "NOAUTH Authentication required.");
    CHECK_RC(addr(&err, host, sizeof(host), &port), SLUICE_EAUTH);
    test_context(NULL);
}

static void test_role(void)
{
    redisReply role = text_reply(REDIS_REPLY_STRING, "master");
    redisReply *el[1] = {&role};
    redisReply arr, num;

    test_context("role_parse");
    memset(&arr, 0, sizeof(arr));
    arr.type = REDIS_REPLY_ARRAY;
    arr.elements = 1;
    arr.element = el;
    CHECK_OK(sluice__vk_role_parse(&store, node, &arr));
    role = text_reply(REDIS_REPLY_STRING, "slave");
    CHECK_RC(sluice__vk_role_parse(&store, node, &arr), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slave") != NULL);
    arr.elements = 0;
    CHECK_RC(sluice__vk_role_parse(&store, node, &arr), SLUICE_EPROTO);
    memset(&num, 0, sizeof(num));
    num.type = REDIS_REPLY_INTEGER;
    CHECK_RC(sluice__vk_role_parse(&store, node, &num), SLUICE_EPROTO);
    test_context(NULL);
}

int main(void)
{
    store.master_name = "sluice-master";
    sentinel = sluice__vk_node_new("127.0.0.1", 9, 26379,
                                   &sluice__vk_transport_tcp, 0);
    node = sluice__vk_node_new("127.0.0.1", 9, 6390,
                               &sluice__vk_transport_tcp, 0);
    if (!CHECK(sentinel != NULL && node != NULL))
        return test_summary("test_route_readers");
    test_redirects();
    test_sentinel_addr();
    test_role();
    sluice__vk_node_free(node);
    sluice__vk_node_free(sentinel);
    return test_summary("test_route_readers");
}
