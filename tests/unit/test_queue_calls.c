/*
 * test_queue_calls.c - the readers of the queue's replies (src/queue/
 * take.c), which the blocking calls and the async ones share: a take's
 * job, wait and "emq.rate_limit.hit" event, a finish's outcome and
 * SLUICE_ELEASE, and every malformed reply refused as SLUICE_EPROTO. The
 * replies are RESP text fed to hiredis' reader, as a server would send
 * them; no server runs. And the builders' checks, made before any server
 * is asked: on the embedded store, a call that needs a server is
 * SLUICE_ENOTSUP naming the call, and arguments out of range are refused
 * first.
 */
#include "queue/queue.h"
#include "test.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

/* The reply that RESP text 'resp' reads as (exits if it does not). */
static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;

    if (rd == NULL || redisReaderFeed(rd, resp, strlen(resp)) != REDIS_OK ||
        redisReaderGetReply(rd, &r) != REDIS_OK || r == NULL) {
        fprintf(stderr, "cannot read '%s'\n", resp);
        exit(2);
    }
    redisReaderFree(rd);
    return r;
}

typedef struct seen {
    int calls;
    double delay_ms;
    char queue[32], limit[32];
} seen;

static void on_event(const sluice_event *ev, void *payload)
{
    seen *s = payload;

    s->calls++;
    for (size_t i = 0; i < ev->n_measurements; i++)
        if (strcmp(ev->measurements[i].name, "delay_ms") == 0)
            s->delay_ms = ev->measurements[i].value;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        const sluice_metadata *m = &ev->metadata[i];
        char *dst = strcmp(m->name, "queue") == 0   ? s->queue
                    : strcmp(m->name, "limit") == 0 ? s->limit
                                                    : NULL;

        if (dst != NULL)
            snprintf(dst, 32, "%.*s", (int)m->value_len, m->value);
    }
}

static seen events;

/* Reads 'resp' as a take's reply of queue "q\0x" (binary). */
static int take(const char *resp, sluice_take_status *st, uint64_t *wait,
                sluice_job *job)
{
    redisReply *r = reply_of(resp);
    int rc;

    test_context("take reply %s", resp);
    rc = sluice__queue_take_read(r, "q\0x", 3, st, wait, job);
    freeReplyObject(r);
    return rc;
}

static void case_take(void)
{
    sluice_take_status st;
    sluice_job job = {0};
    uint64_t wait = 7;

    CHECK_OK(take("*5\r\n:1\r\n:7\r\n:2\r\n$4\r\na\r\nb\r\n:9\r\n", &st, &wait,
                  &job));
    CHECK_EQ_U64(st, SLUICE_TAKE_JOB);
    CHECK_EQ_U64(wait, 0);
    CHECK_EQ_U64(job.id, 7);
    CHECK_EQ_U64(job.attempt, 2);
    CHECK_EQ_U64(job.lease, 9);
    CHECK(job.payload_len == 4 && memcmp(job.payload, "a\r\nb", 5) == 0);
    sluice_job_clear(&job);
    CHECK_EQ_U64(events.calls, 0);

    CHECK_OK(take("*3\r\n:0\r\n:1500\r\n:2\r\n", &st, &wait, &job));
    CHECK_EQ_U64(st, SLUICE_TAKE_DEFERRED);
    CHECK_EQ_U64(wait, 1500);
    CHECK(job.payload == NULL && job.id == 0);
    CHECK_EQ_U64(events.calls, 1);
    CHECK(events.delay_ms == 1500.0);
    CHECK(memcmp(events.queue, "q", 2) == 0); /* cut at its NUL here */
    CHECK(strcmp(events.limit, "2") == 0);

    CHECK_OK(take("*2\r\n:-1\r\n:250\r\n", &st, &wait, &job));
    CHECK_EQ_U64(st, SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 250);
    CHECK_EQ_U64(events.calls, 1);
}

/* Replies no take script sends: SLUICE_EPROTO, no job kept, no event. */
static void case_take_malformed(void)
{
    static const char *const bad[] = {
        ":1\r\n",                                    /* no list */
        "*1\r\n:1\r\n",                              /* too short */
        "*2\r\n:2\r\n:0\r\n",                        /* no such status */
        "*2\r\n$1\r\n1\r\n:0\r\n",                   /* status as text */
        "*5\r\n:1\r\n:7\r\n:2\r\n:5\r\n:9\r\n",      /* payload no string */
        "*5\r\n:1\r\n:0\r\n:2\r\n$1\r\na\r\n:9\r\n", /* id 0 */
        "*5\r\n:1\r\n:7\r\n:2\r\n$1\r\na\r\n:0\r\n", /* lease 0 */
        "*4\r\n:1\r\n:7\r\n:2\r\n$1\r\na\r\n",       /* no lease */
        "*3\r\n:0\r\n:0\r\n:2\r\n",                  /* deferred, no wait */
        "*2\r\n:0\r\n:100\r\n",                      /* deferred, no max */
        "*3\r\n:-1\r\n:0\r\n:0\r\n",                 /* empty, too long */
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sluice_take_status st;
        sluice_job job = {0};
        uint64_t wait;

        CHECK_RC(take(bad[i], &st, &wait, &job), SLUICE_EPROTO);
        CHECK(job.payload == NULL && job.id == 0);
    }
    CHECK_EQ_U64(events.calls, 1);
}

/* Reads 'resp' as op 'op''s reply on job 12, lease 34. */
static int finish(const char *resp, sluice__qfinish op, uint64_t *outcome)
{
    redisReply *r = reply_of(resp);
    int rc;

    test_context("finish %d reply %s", (int)op, resp);
    rc = sluice__queue_finish_read(r, op, 12, 34, outcome);
    freeReplyObject(r);
    return rc;
}

static void case_finish(void)
{
    uint64_t o = 99;

    CHECK_OK(finish(":1\r\n", SLUICE__QF_COMPLETE, &o));
    CHECK_EQ_U64(o, SLUICE__QDONE_COMPLETED);
    CHECK_OK(finish(":2\r\n", SLUICE__QF_FAIL, &o));
    CHECK_EQ_U64(o, SLUICE__QDONE_RETRY);
    CHECK_OK(finish(":3\r\n", SLUICE__QF_FAIL, &o));
    CHECK_EQ_U64(o, SLUICE__QDONE_DEAD);
    CHECK_OK(finish(":4\r\n", SLUICE__QF_EXTEND, &o));
    CHECK_EQ_U64(o, SLUICE__QDONE_EXTENDED);
    for (int op = SLUICE__QF_COMPLETE; op <= SLUICE__QF_EXTEND; op++) {
        CHECK_RC(finish(":0\r\n", (sluice__qfinish)op, &o), SLUICE_ELEASE);
        CHECK(strstr(sluice_last_error(), "job 12: the lease 34 is no "
                                          "longer held") != NULL);
    }
    /* An outcome of another op, out of range, or not a number. */
    CHECK_RC(finish(":2\r\n", SLUICE__QF_COMPLETE, &o), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "queue complete: the script answered 2")
          != NULL);
    CHECK_RC(finish(":1\r\n", SLUICE__QF_FAIL, &o), SLUICE_EPROTO);
    CHECK_RC(finish(":3\r\n", SLUICE__QF_EXTEND, &o), SLUICE_EPROTO);
    CHECK_RC(finish(":5\r\n", SLUICE__QF_COMPLETE, &o), SLUICE_EPROTO);
    CHECK_RC(finish(":-1\r\n", SLUICE__QF_COMPLETE, &o), SLUICE_EPROTO);
    CHECK_RC(finish("$1\r\n1\r\n", SLUICE__QF_COMPLETE, &o), SLUICE_EPROTO);
}

/* The builders on the embedded store: the arguments first, then
   SLUICE_ENOTSUP naming the call. */
static void case_build(void)
{
    sluice_store *mem = NULL;
    sluice__qsend q;

    test_context("builders");
    if (!CHECK_OK(sluice_store_open(&mem, "mem://", NULL)))
        return;
    CHECK_RC(sluice__queue_take_build(&q, mem, "the_take", "q", 1, 0, 1),
             SLUICE_ERANGE);
    sluice__qsend_free(&q);
    CHECK_RC(sluice__queue_take_build(&q, mem, "the_take", "q", 1,
                                      SLUICE_WINDOW_MAX_MS + 1, 1),
             SLUICE_ERANGE);
    sluice__qsend_free(&q);
    CHECK_RC(sluice__queue_take_build(&q, mem, "the_take", "q", 1, 1000, 1),
             SLUICE_ENOTSUP);
    CHECK(strstr(sluice_last_error(), "the_take needs a server store") !=
          NULL);
    sluice__qsend_free(&q);
    CHECK_RC(sluice__queue_finish_build(&q, mem, "the_fail", SLUICE__QF_FAIL,
                                        "q", 1, 1, 1, 0, 0),
             SLUICE_ERANGE);
    sluice__qsend_free(&q);
    CHECK_RC(sluice__queue_finish_build(&q, mem, "the_extend",
                                        SLUICE__QF_EXTEND, "q", 1, 1, 1, 0, 0),
             SLUICE_ERANGE);
    sluice__qsend_free(&q);
    CHECK_RC(sluice__queue_finish_build(&q, mem, "the_done",
                                        SLUICE__QF_COMPLETE, "q", 1, 1, 1, 0,
                                        0),
             SLUICE_ENOTSUP);
    CHECK(strstr(sluice_last_error(), "the_done needs") != NULL);
    sluice__qsend_free(&q);
    sluice_store_free(mem);
}

int main(void)
{
    CHECK_OK(sluice_telemetry_attach("test_queue_calls", "emq.rate_limit.hit",
                                     on_event, &events));
    case_take();
    case_take_malformed();
    case_finish();
    case_build();
    sluice_telemetry_detach("test_queue_calls");
    return test_summary("test_queue_calls");
}
