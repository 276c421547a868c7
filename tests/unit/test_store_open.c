/*
 * test_store_open.c - what opening a store checks, and what its messages
 * show, with no server: every check here happens at open, before a
 * connection is tried.
 *
 *   - store options out of range (timeouts of UINT64_MAX, a pool of 0 or
 *     2000, reply caps beyond 4 GB or below 2 KB, caller_clock 2) are
 *     SLUICE_EINVAL at open, naming the option;
 *   - the same through the URL's query are SLUICE_EURL;
 *   - options of version 1 (a caller built before max_reply_bytes) still
 *     open, the later fields at their defaults;
 *   - a password never shows in a message: not one holding '/' or '?', not
 *     one the parser could not place; and every URL error still names what
 *     is wrong (a short password used to withhold them all);
 *   - '#' is a fragment, not a port; a very long host leaves room for the
 *     reason.
 */
#include "test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Opens 'url' with 'o' (NULL: defaults): the code; frees a store opened. */
static int open_rc(const char *url, const sluice_store_opts *o)
{
    sluice_store *st = NULL;
    int rc = sluice_store_open(&st, url, o);

    sluice_store_free(st);
    return rc;
}

static void test_option_ranges(void)
{
    static const struct {
        const char *field;
        size_t offset, size;
        uint64_t bad, good;
    } cases[] = {
#define FIELD(f, bad, good)                                            \
    {#f, offsetof(sluice_store_opts, f),                               \
     sizeof(((sluice_store_opts *)0)->f), (bad), (good)}
        FIELD(connect_timeout_ms, UINT64_MAX, 3600000),
        FIELD(connect_timeout_ms, 3600001, 1),
        FIELD(command_timeout_ms, UINT64_MAX, 3600000),
        FIELD(pool_size, 1025, 1024),
        FIELD(max_reply_bytes, ((uint64_t)1 << 32) + 1, (uint64_t)1 << 32),
        FIELD(max_reply_bytes, 100, 2048),
        FIELD(max_reply_elements, (uint64_t)1 << 31, 1),
        FIELD(caller_clock, 2, 1),
#undef FIELD
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
        unsigned char *field = (unsigned char *)&o + cases[i].offset;

        test_context("option %s", cases[i].field);
        memcpy(field, &cases[i].bad, cases[i].size);
        CHECK_RC(open_rc("redis://127.0.0.1:1", &o), SLUICE_EINVAL);
        CHECK(strstr(sluice_last_error(), cases[i].field) != NULL ||
              strstr(sluice_last_error(), "pool_size") != NULL);
        memcpy(field, &cases[i].good, cases[i].size);
        CHECK_OK(open_rc("redis://127.0.0.1:1", &o));
    }
    test_context("the URL's query");
    CHECK_RC(open_rc("redis://h?timeout=3600001", NULL), SLUICE_EURL);
    CHECK_RC(open_rc("redis://h?max_reply_bytes=100", NULL), SLUICE_EURL);
    CHECK_RC(open_rc("redis://h?max_reply_elements=0", NULL), SLUICE_EURL);
    CHECK_OK(open_rc("redis://h?max_reply_bytes=2048&max_reply_elements=9",
                     NULL));
    CHECK(strstr(sluice_store_url_options(), "max_reply_bytes") != NULL);
    test_context(NULL);
}

static void test_option_versions(void)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;

    test_context("options of version 1");
    o.version = 1;
    /* Fields after version 1's hold garbage: never read. */
    o.max_reply_bytes = 1;
    o.max_reply_elements = UINT64_MAX;
    CHECK_OK(open_rc("redis://127.0.0.1:1", &o));
    CHECK_OK(open_rc(NULL, &o));
    o.version = SLUICE_STORE_OPTS_VERSION;
    CHECK_RC(open_rc("redis://127.0.0.1:1", &o), SLUICE_EINVAL);
    test_context(NULL);
}

/* Opens 'url', which must fail with SLUICE_EURL; the message must not hold
   'secret' and must hold 'reason'. */
static void url_error(const char *url, const char *secret, const char *reason)
{
    test_context("URL %s", reason);
    CHECK_RC(open_rc(url, NULL), SLUICE_EURL);
    if (!CHECK(strstr(sluice_last_error(), secret) == NULL))
        fprintf(stderr, "    it showed: %s\n", sluice_last_error());
    if (!CHECK(strstr(sluice_last_error(), reason) != NULL))
        fprintf(stderr, "    it said: %s\n", sluice_last_error());
}

static void test_url_messages(void)
{
    char host[5200];

    url_error("redis://:pa/ss@127.0.0.1:1", "pa/ss", "%2F");
    url_error("redis://:pa/ss@127.0.0.1:1", "ss@", "'@' follows the host");
    url_error("redis://:s3cr?t@h", "s3cr", "%3F");
    url_error("redis://u:p@ss@h:99999", "p@ss", "port");
    url_error("redis://:k@h:6379/x", ":k@", "database");
    /* A short password does not hide what is wrong. */
    url_error("redis://:a@h:0", ":a@", "port must be");
    url_error("redis://onlyuser@h", "onlyuser", "needs a password");
    url_error("redis://h:6379#frag", "\x01", "#fragment");
    url_error("redis://:x%zz@h", "%zz", "bad %-escape");
    memset(host, 'a', sizeof(host));
    memcpy(host, "redis://:pw@", 12);
    memcpy(host + sizeof(host) - 8, ":99999", 7);
    url_error(host, ":pw@", "port must be");
    test_context(NULL);
}

/* A host of 3,000 bytes: the message that it cannot be reached still says
   why, after the host cut short. */
static void test_long_host(void)
{
    char url[3100];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1, 1000);
    sluice_decision d;
    sluice_store *st = NULL;

    test_context("a long host");
    memcpy(url, "redis://", 8);
    memset(url + 8, 'h', 3000);
    memcpy(url + 3008, ":1?connect_timeout=200", 23);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        return;
    CHECK_RC(sluice_hit(&d, st, &lim, "k", 1, 1), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "...") != NULL);
    /* A name is resolved first (tcp.c): it fails there, or at the
       connect. */
    if (!CHECK(strstr(sluice_last_error(), "connect:") != NULL ||
               strstr(sluice_last_error(), "resolve:") != NULL))
        fprintf(stderr, "    it said: %s\n", sluice_last_error());
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    test_option_ranges();
    test_option_versions();
    test_url_messages();
    test_long_host();
    return test_summary("test_store_open");
}
