/*
 * test_fake_node.c - the tests' fake node (support/fake_node.h) does what
 * the tests that script it rely on, seen from a plain hiredis client:
 * scripted replies by name, a handler's own replies, commands counted and
 * logged in order, pipelined commands answered in order, a reply held and
 * then dripped a byte at a time, a hang-up, a node that never answers, and
 * raw bytes no server would send. No server runs.
 */
#include "fake_node.h"
#include "server.h" /* rs_mono_ms() */
#include "test.h"

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

/* Answers ECHO with its argument; says nothing to HUSH; hangs up on BYE. */
static int handler(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    (void)payload;
    if (fake_cmd_is(cmd, "ECHO") && cmd->argc == 2) {
        fake_replyf(c, "$%zu\r\n", cmd->lens[1]);
        fake_reply(c, cmd->argv[1], cmd->lens[1]);
        fake_reply(c, "\r\n", 2);
        return 1;
    }
    if (fake_cmd_is(cmd, "HUSH"))
        return 1;
    if (fake_cmd_is(cmd, "BYE")) {
        fake_replyf(c, "+BYE\r\n");
        fake_hang_up(c);
        return 1;
    }
    return 0;
}

static redisContext *connect_to(fake_node *n, long timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", fake_node_port(n),
                                              tv);

    if (!CHECK(c != NULL && c->err == 0))
        return c;
    redisSetTimeout(c, tv);
    return c;
}

/* A reply of 'type' whose text is 'want'. */
static int reply_is(redisReply *r, int type, const char *want)
{
    int ok = r != NULL && r->type == type && strcmp(r->str, want) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

static void test_replies(fake_node *n)
{
    const char *argv[] = {"ECHO", "a\0b"};
    size_t lens[] = {4, 3};
    redisContext *c = connect_to(n, 2000);
    redisReply *r;
    void *v;

    test_context("scripted replies, a handler's, counts, the log");
    fake_node_on(n, "PING", "+PONG\r\n");
    fake_node_on(n, "CLUSTER SLOTS", "*0\r\n");
    CHECK(reply_is(redisCommand(c, "PING"), REDIS_REPLY_STATUS, "PONG"));
    CHECK(reply_is(redisCommand(c, "ping"), REDIS_REPLY_STATUS, "PONG"));
    r = redisCommandArgv(c, 2, argv, lens);
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING && r->len == 3 &&
          memcmp(r->str, "a\0b", 3) == 0);
    if (r != NULL)
        freeReplyObject(r);
    r = redisCommand(c, "CLUSTER SLOTS");
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 0);
    if (r != NULL)
        freeReplyObject(r);
    CHECK(reply_is(redisCommand(c, "CLUSTER NODES"), REDIS_REPLY_ERROR,
                   "ERR unknown command 'CLUSTER'"));
    /* Pipelined: answered in order. */
    redisAppendCommand(c, "ECHO one");
    redisAppendCommand(c, "PING");
    CHECK(redisGetReply(c, &v) == REDIS_OK &&
          reply_is(v, REDIS_REPLY_STRING, "one"));
    CHECK(redisGetReply(c, &v) == REDIS_OK &&
          reply_is(v, REDIS_REPLY_STATUS, "PONG"));
    CHECK_EQ_U64(fake_node_count(n, "PING"), 3);
    CHECK_EQ_U64(fake_node_count(n, "CLUSTER"), 2);
    CHECK_EQ_U64(fake_node_count(n, "CLUSTER SLOTS"), 1);
    CHECK_EQ_U64(fake_node_count(n, NULL), 7);
    {
        size_t len;
        const fake_log_entry *log;

        fake_lock();
        log = fake_log(&len);
        CHECK(len == 7 && fake_log_is(&log[3], "CLUSTER SLOTS") &&
              strcmp(log[4].words[1], "NODES") == 0 && log[6].conn == 1);
        fake_unlock();
    }
    redisFree(c);
    fake_node_reset(n);
    fake_log_clear();
    test_context(NULL);
}

/* A reply held 'delay' ms, then one byte every 'drip' ms. */
static void test_pace(fake_node *n)
{
    redisContext *c = connect_to(n, 5000);
    uint64_t t0;

    test_context("a reply held, then dripped");
    fake_node_on(n, "PING", "+PONG\r\n"); /* 7 bytes */
    fake_node_pace(n, 200, 50);
    t0 = rs_mono_ms();
    CHECK(reply_is(redisCommand(c, "PING"), REDIS_REPLY_STATUS, "PONG"));
    CHECK(rs_mono_ms() - t0 >= 200 + 6 * 50);
    fake_node_reset(n);
    t0 = rs_mono_ms();
    CHECK(reply_is(redisCommand(c, "ECHO x"), REDIS_REPLY_STRING, "x"));
    CHECK(rs_mono_ms() - t0 < 200);
    redisFree(c);
    test_context(NULL);
}

/* A hang-up, a node that never answers, and bytes no server would send. */
static void test_hostile(fake_node *n)
{
    redisContext *c = connect_to(n, 300);
    uint64_t t0;

    test_context("hang-up, silence, hostile bytes");
    CHECK(reply_is(redisCommand(c, "BYE"), REDIS_REPLY_STATUS, "BYE"));
    CHECK(redisCommand(c, "PING") == NULL && c->err != 0);
    redisFree(c);
    c = connect_to(n, 300);
    t0 = rs_mono_ms();
    CHECK(redisCommand(c, "HUSH") == NULL && c->err != 0);
    CHECK(rs_mono_ms() - t0 >= 250);
    redisFree(c);
    c = connect_to(n, 300);
    fake_node_on(n, "GET", "$99999999999\r\nabc\r\n");
    CHECK(redisCommand(c, "GET k") == NULL && c->err != 0);
    redisFree(c);
    c = connect_to(n, 300);
    fake_node_on(n, "GET", "?garbage\r\n");
    CHECK(redisCommand(c, "GET k") == NULL && c->err == REDIS_ERR_PROTOCOL);
    redisFree(c);
    fake_node_reset(n);
    test_context(NULL);
}

int main(void)
{
    fake_node *n = fake_node_start(0, handler, NULL);

    if (!CHECK(n != NULL))
        return test_summary("test_fake_node");
    printf("test_fake_node: a fake node on port %d\n", fake_node_port(n));
    test_replies(n);
    test_pace(n);
    test_hostile(n);
    fake_node_stop(n);
    fake_node_stop(NULL);
    fake_log_clear();
    return test_summary("test_fake_node");
}
