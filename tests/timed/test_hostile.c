/*
 * test_hostile.c - a server store against a hostile server: one fake node
 * (support/fake_node.h) that answers every script call with bytes of the
 * test's choosing. No server runs. Issue 11, items 1 to 3:
 *
 *   1. a reply hiredis cannot read (garbage, an integer beyond 64 bits,
 *      negative lengths, deep nesting, RESP3 types) is SLUICE_EPROTO, also
 *      with on_error=open or closed: a bad reply is never taken for an
 *      outage, so no policy stands in for it;
 *   2. every call has one deadline: a reply dripped a byte every 150 ms, a
 *      reply begun and never ended, and no reply at all end in
 *      SLUICE_ETIMEDOUT within the command timeout; a reply that announces
 *      2^31 bytes or elements ends in SLUICE_EPROTO at once, with at most
 *      max_reply_bytes buffered;
 *   3. every field of every reply is checked: a decision that is not one
 *      (remaining > max, allowed 2, a refusal without a wait, ...), a stats
 *      reply of one field, failed ids "abc" and "-5", an unknown take
 *      status, a SCRIPT LOAD that answers another SHA1: SLUICE_EPROTO.
 *
 * After each, the store is still usable: the next good reply is read.
 */
#include "fake_cluster.h" /* fc_script_sha() */
#include "fake_node.h"
#include "server.h" /* rs_mono_ms() */
#include "stores.h"
#include "test.h"

#include <sluice.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 400
/* How long past the command timeout a call may take on a loaded machine. */
#define SLACK_MS 600

/* The fixed window's answer to a first hit of max 10 per minute. */
#define GOOD "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n"

/* What the node answers to EVALSHA (under the fakes' lock). */
static struct {
    const char *bytes; /* NULL: nothing at all */
    size_t len;
    size_t filler; /* bytes of 'x' sent after it */
    int wrong_sha; /* SCRIPT LOAD answers a SHA1 of zeros */
} answer;

static void set_answer(const char *bytes, size_t len, size_t filler)
{
    fake_lock();
    answer.bytes = bytes;
    answer.len = len;
    answer.filler = filler;
    fake_unlock();
}

static void set_reply(const char *bytes)
{
    set_answer(bytes, bytes != NULL ? strlen(bytes) : 0, 0);
}

static int handler(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    (void)payload;
    if (fake_cmd_is(cmd, "SCRIPT LOAD") && cmd->argc == 3) {
        fake_replyf(c, "$40\r\n%s\r\n",
                    answer.wrong_sha
                        ? "0000000000000000000000000000000000000000"
                        : fc_script_sha(cmd->argv[2], cmd->lens[2]));
        return 1;
    }
    if (fake_cmd_is(cmd, "EVALSHA")) {
        if (answer.bytes != NULL)
            fake_reply(c, answer.bytes, answer.len);
        if (answer.filler > 0) {
            char *x = malloc(answer.filler);

            if (x != NULL) {
                memset(x, 'x', answer.filler);
                fake_reply(c, x, answer.filler);
                free(x);
            }
        }
        return 1;
    }
    if (fake_cmd_is(cmd, "SADD")) {
        fake_replyf(c, ":1\r\n");
        return 1;
    }
    return 0;
}

static fake_node *node;

static sluice_store *open_store(const char *options)
{
    sluice_store *st = NULL;
    char url[256];

    snprintf(url, sizeof(url),
             "redis://127.0.0.1:%d?timeout=%d&connect_timeout=%d%s%s",
             fake_node_port(node), TIMEOUT_MS, TIMEOUT_MS,
             options[0] != '\0' ? "&" : "", options);
    if (!CHECK_OK(sluice_store_open(&st, url, NULL)))
        exit(2);
    return st;
}

static const sluice_limit limit = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

/* After a bad reply, the store reads the next good one. */
static void check_recovers(sluice_store *st)
{
    sluice_decision d;
    uint64_t ms;

    set_reply(GOOD);
    fake_node_pace(node, 0, 0);
    CHECK_OK(test_hit_timed(&d, st, &limit, &ms));
    CHECK(d.allowed == 1 && d.remaining == 9 && d.reset_after_ms == 60000);
}

/* ---- 1. Replies hiredis cannot read ----------------------------------------- */

static const char *const unreadable[] = {
    "!garbage\r\n",
    ":99999999999999999999999\r\n",
    ":-99999999999999999999999\r\n",
    ":12abc\r\n",
    "$-5\r\n",
    "*-5\r\n",
    "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
    "%1\r\n+a\r\n:1\r\n", /* RESP3 map */
    "~1\r\n:1\r\n",       /* set */
    ",1.5\r\n",           /* double */
    "#t\r\n",             /* boolean */
    "_\r\n",              /* null */
    ">1\r\n:1\r\n",       /* push */
    "(123\r\n",           /* big number */
    "=5\r\ntxt:a\r\n",    /* verbatim string */
    "+OK\r\n",            /* a status, not a decision */
    ":1\r\n",             /* an integer, not a decision */
    "$2\r\nhi\r\n",       /* a string, not a decision */
};

static void test_unreadable(void)
{
    static const char *const policies[] = {"", "on_error=open",
                                           "on_error=closed"};

    for (size_t p = 0; p < 3; p++) {
        sluice_store *st = open_store(policies[p]);

        for (size_t i = 0; i < sizeof(unreadable) / sizeof(*unreadable); i++) {
            sluice_decision d;
            uint64_t ms;
            int rc;

            test_context("%s, reply %s", policies[p][0] ? policies[p]
                                                        : "on_error=error",
                         unreadable[i]);
            set_reply(unreadable[i]);
            rc = test_hit_timed(&d, st, &limit, &ms);
            CHECK_RC(rc, SLUICE_EPROTO);
            CHECK(ms < TIMEOUT_MS); /* at once, not at the timeout */
            CHECK(strlen(sluice_last_error()) > 0);
            if (getenv("SLUICE_TEST_VERBOSE") != NULL)
                printf("  %-28.*s %s\n", (int)strcspn(unreadable[i], "\r"),
                       unreadable[i], sluice_last_error());
            check_recovers(st);
        }
        {
            sluice_store_stats s;

            CHECK_OK(sluice_store_stats_get(&s, st));
            CHECK_EQ_U64(s.fell_open + s.fell_closed, 0); /* no policy stood in */
        }
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* ---- 2. One deadline per call, capped replies ------------------------------- */

static void expect_timeout(sluice_store *st, const char *what)
{
    sluice_decision d;
    uint64_t ms;

    test_context("%s", what);
    CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_ETIMEDOUT);
    CHECK(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + SLACK_MS);
    printf("  %-44s ETIMEDOUT after %" PRIu64 " ms (timeout %d)\n", what, ms,
           TIMEOUT_MS);
    check_recovers(st);
    test_context(NULL);
}

static void test_deadline(void)
{
    sluice_store *st = open_store("");

    /* A whole reply, a byte every 150 ms: 26 bytes would take 3.9 s. */
    set_reply(GOOD);
    fake_node_pace(node, 0, 150);
    expect_timeout(st, "a reply dripped a byte every 150 ms");
    /* A batch of two script calls (512 + 88 requests): one deadline for
       the batch, not one per call. */
    {
        static sluice_request reqs[600];
        uint64_t t0 = rs_mono_ms(), ms;
        int rc;

        test_context("a batch of two calls, each reply dripped");
        fake_node_pace(node, 0, 150);
        for (size_t i = 0; i < 600; i++)
            reqs[i] = (sluice_request){.key = "k", .key_len = 1, .cost = 1};
        rc = sluice_hit_many(st, &limit, reqs, 600);
        ms = rs_mono_ms() - t0;
        CHECK_RC(rc, SLUICE_ETIMEDOUT);
        CHECK(reqs[0].err == SLUICE_ETIMEDOUT &&
              reqs[599].err == SLUICE_ETIMEDOUT);
        CHECK(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + SLACK_MS);
        printf("  %-44s ETIMEDOUT after %" PRIu64 " ms (timeout %d)\n",
               "a batch of 600 (two calls), dripped", ms, TIMEOUT_MS);
        check_recovers(st);
        test_context(NULL);
    }
    /* Good RESP with a count that is not the batch's, on both calls: both
       EPROTO, neither taken for an outage. */
    {
        static sluice_request reqs[600];

        test_context("a batch of two calls, each answered wrongly");
        for (size_t i = 0; i < 600; i++)
            reqs[i] = (sluice_request){.key = "k", .key_len = 1, .cost = 1};
        CHECK_RC(sluice_hit_many(st, &limit, reqs, 600), SLUICE_EPROTO);
        CHECK(reqs[0].err == SLUICE_EPROTO && reqs[599].err == SLUICE_EPROTO);
        check_recovers(st);
        test_context(NULL);
    }
    /* Begun, never ended. */
    set_reply("*4\r\n:1\r\n");
    expect_timeout(st, "half a reply, then silence");
    /* Nothing at all. */
    set_reply(NULL);
    expect_timeout(st, "no reply");
    sluice_store_free(st);
}

static void expect_cap(sluice_store *st, const char *what, size_t filler,
                       const char *reply)
{
    sluice_decision d;
    uint64_t ms;

    test_context("%s", what);
    set_answer(reply, strlen(reply), filler);
    CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_EPROTO);
    CHECK(ms < TIMEOUT_MS);
    CHECK(strstr(sluice_last_error(), "max_reply_") != NULL ||
          strstr(sluice_last_error(), "not a reply") != NULL);
    printf("  %-44s EPROTO after %" PRIu64 " ms: %s\n", what, ms,
           sluice_last_error());
    check_recovers(st);
    test_context(NULL);
}

static void test_caps(void)
{
    sluice_store *st = open_store("max_reply_bytes=65536");

    /* A length of 2 GB, then 1 MB of it: refused once 64 KB is buffered
       (a cap of megabytes takes a ThreadSanitizer build on a loaded
       machine near the 400 ms timeout just to move them). */
    expect_cap(st, "$2147483647 then 1 MB (max_reply_bytes 64 KB)",
               1u << 20, "$2147483647\r\n");
    sluice_store_free(st);

    /* The defaults: 2^31 - 1 elements are refused before any is read. */
    st = open_store("");
    expect_cap(st, "*2147483647 (default max 1,048,576)", 0,
               "*2147483647\r\n");
    expect_cap(st, "*1048577 (one over the default)", 0, "*1048577\r\n");
    sluice_store_free(st);

    /* The cap counts elements across the whole reply, not per array. */
    st = open_store("max_reply_elements=8");
    expect_cap(st, "*3 of *3 (12 elements, max 8)", 0,
               "*3\r\n*3\r\n:1\r\n:1\r\n:1\r\n*3\r\n:1\r\n:1\r\n:1\r\n"
               "*3\r\n:1\r\n:1\r\n:1\r\n");
    sluice_store_free(st);
}

/* ---- 3. Every field checked ------------------------------------------------- */

static const char *const wrong_decisions[] = {
    "*4\r\n:1\r\n:99\r\n:0\r\n:60000\r\n",   /* remaining > max */
    "*4\r\n:2\r\n:9\r\n:0\r\n:60000\r\n",    /* allowed 2 */
    "*4\r\n:1\r\n:10\r\n:0\r\n:60000\r\n",   /* admitted, nothing spent */
    "*4\r\n:1\r\n:9\r\n:5\r\n:60000\r\n",    /* admitted with a wait */
    "*4\r\n:0\r\n:0\r\n:0\r\n:60000\r\n",    /* refused, no wait */
    "*4\r\n:0\r\n:0\r\n:70000\r\n:60000\r\n", /* wait past the reset */
    "*4\r\n:1\r\n:-9\r\n:0\r\n:60000\r\n",   /* negative */
    "*4\r\n:1\r\n$1\r\n9\r\n:0\r\n:60000\r\n", /* a string for a number */
    "*3\r\n:1\r\n:9\r\n:0\r\n",               /* three fields */
    "*5\r\n:1\r\n:9\r\n:0\r\n:60000\r\n:1\r\n", /* five */
    "*4\r\n:1\r\n:9\r\n:0\r\n*0\r\n",        /* an array for a number */
    "*0\r\n",
};

static void test_decision_fields(void)
{
    sluice_store *st = open_store("on_error=open");

    for (size_t i = 0; i < sizeof(wrong_decisions) / sizeof(*wrong_decisions);
         i++) {
        sluice_decision d;
        uint64_t ms;

        test_context("decision %zu: %s", i, wrong_decisions[i]);
        set_reply(wrong_decisions[i]);
        CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_EPROTO);
        if (getenv("SLUICE_TEST_VERBOSE") != NULL)
            printf("  %s\n", sluice_last_error());
    }
    /* A reset further out than the algorithm reaches: the sliding log's
       is at most one window (the fixed window's PTTL has no bound). */
    {
        static const sluice_limit log =
            SLUICE_LIMIT(SLUICE_SLIDING_LOG, 10, 60000);
        sluice_decision d;

        test_context("sliding log, reset 60001 of a 60000 ms window");
        set_reply("*4\r\n:1\r\n:9\r\n:0\r\n:60001\r\n");
        CHECK_RC(sluice_hit(&d, st, &log, "k", 1, 1), SLUICE_EPROTO);
        set_reply("*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n");
        CHECK_OK(sluice_hit(&d, st, &log, "k", 1, 1));
    }
    check_recovers(st);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_queue_fields(void)
{
    sluice_store *st = open_store("");
    sluice_queue_stats stats;
    sluice_take_status status;
    uint64_t wait = 0, ids[4];
    sluice_job job;
    size_t n;

    memset(&job, 0, sizeof(job));
    test_context("stats of one field");
    set_reply("*1\r\n:0\r\n");
    CHECK_RC(sluice_queue_stats_get(&stats, st, "q", 1), SLUICE_EPROTO);
    test_context("stats with a negative count");
    set_reply("*9\r\n:0\r\n:0\r\n:0\r\n:-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n");
    CHECK_RC(sluice_queue_stats_get(&stats, st, "q", 1), SLUICE_EPROTO);
    test_context("stats of nine fields");
    set_reply("*9\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n");
    CHECK_OK(sluice_queue_stats_get(&stats, st, "q", 1));
    CHECK(stats.waiting == 1 && stats.wait_ms == 9);

    for (int bad = 0; bad < 3; bad++) {
        static const char *const lists[] = {
            "*2\r\n$1\r\n1\r\n$3\r\nabc\r\n", "*1\r\n$2\r\n-5\r\n",
            "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"};

        test_context("failed ids %s", lists[bad]);
        set_reply(lists[bad]);
        n = 4;
        CHECK_RC(sluice_queue_failed(ids, &n, st, "q", 1), SLUICE_EPROTO);
    }
    test_context("failed ids 7, 8");
    set_reply("*2\r\n$1\r\n7\r\n$1\r\n8\r\n");
    n = 4;
    CHECK_OK(sluice_queue_failed(ids, &n, st, "q", 1));
    CHECK(n == 2 && ids[0] == 7 && ids[1] == 8);

    for (int bad = 0; bad < 6; bad++) {
        static const char *const takes[] = {
            "*2\r\n:7\r\n:0\r\n",                 /* status 7 */
            "*2\r\n:-2\r\n:0\r\n",                /* status -2 */
            "*3\r\n:0\r\n:0\r\n:5\r\n",           /* deferred, no wait */
            "*5\r\n:1\r\n$3\r\nabc\r\n:1\r\n$1\r\np\r\n:9\r\n", /* id */
            "*5\r\n:1\r\n:4\r\n:1\r\n:5\r\n:9\r\n", /* payload not a string */
            "*4\r\n:1\r\n:4\r\n:1\r\n$1\r\np\r\n"}; /* no lease */

        test_context("take %s", takes[bad]);
        set_reply(takes[bad]);
        CHECK_RC(sluice_queue_take(&status, &wait, &job, st, "q", 1, 1000),
                 SLUICE_EPROTO);
        CHECK(job.payload == NULL);
    }
    test_context("take a job");
    set_reply("*5\r\n:1\r\n:4\r\n:1\r\n$1\r\np\r\n:9\r\n");
    CHECK_OK(sluice_queue_take(&status, &wait, &job, st, "q", 1, 1000));
    CHECK(status == SLUICE_TAKE_JOB && job.id == 4 && job.lease == 9 &&
          job.payload_len == 1);
    sluice_job_clear(&job);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_wrong_sha(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("SCRIPT LOAD answers another SHA1");
    fake_lock();
    answer.wrong_sha = 1;
    fake_unlock();
    set_reply(GOOD);
    st = open_store("");
    CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "SHA") != NULL ||
          strstr(sluice_last_error(), "sha") != NULL);
    printf("  wrong SHA1: %s\n", sluice_last_error());
    fake_lock();
    answer.wrong_sha = 0;
    fake_unlock();
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if ((node = fake_node_start(0, handler, NULL)) == NULL) {
        fprintf(stderr, "test_hostile: cannot listen on loopback\n");
        return 2;
    }
    fake_node_on(node, "PING", "+PONG\r\n");
    printf("test_hostile: fake node on port %d\n", fake_node_port(node));
    test_unreadable();
    test_deadline();
    test_caps();
    test_decision_fields();
    test_queue_fields();
    test_wrong_sha();
    fake_node_stop(node);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_hostile");
}
