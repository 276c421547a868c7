/*
 * queue_fixture.c - the job-queue tests' server, store and helpers
 * (queue_fixture.h).
 */
#include "queue_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_server queue_server;
sluice_store *queue_store;
const char *const queue_server_args[] = {"--appendonly", "yes",
                                         "--appendfsync", "always", NULL};

char queue_url[128];

int queue_start(const char *name)
{
    if (rs_start(&queue_server, queue_server_args) < 0) {
        fprintf(stderr, "%s: cannot start redis-server\n", name);
        return -1;
    }
    printf("%s: server %s (pid %d), AOF, fsync always\n", name,
           queue_server.url, (int)queue_server.pid);
    snprintf(queue_url, sizeof(queue_url), "%s?timeout=3000",
             queue_server.url);
    if (sluice_store_open(&queue_store, queue_url, NULL) != 0) {
        fprintf(stderr, "%s: %s\n", name, sluice_last_error());
        rs_stop(&queue_server);
        return -1;
    }
    return 0;
}

void queue_stop(void)
{
    sluice_store_free(queue_store);
    queue_store = NULL;
    rs_stop(&queue_server);
}

void queue_fresh(const char *what)
{
    test_context("%s", what);
    if (!CHECK(rs_ok(&queue_server, "FLUSHALL") == 0))
        exit(2);
}

uint64_t queue_add(const char *q, const char *payload, uint64_t delay_ms)
{
    uint64_t id = 0;

    CHECK_OK(sluice_queue_add(&id, queue_store, q, strlen(q), payload,
                              strlen(payload), delay_ms));
    return id;
}

sluice_take_status queue_take(uint64_t *wait, sluice_job *job, const char *q,
                              uint64_t lease_ms)
{
    sluice_take_status status = 0;
    uint64_t w = 0;

    if (!CHECK_OK(sluice_queue_take(&status, &w, job, queue_store, q,
                                    strlen(q), lease_ms)))
        return 0;
    if (wait != NULL)
        *wait = w;
    return status;
}

int queue_take_when_ready(sluice_job *job, const char *q, uint64_t bound_ms)
{
    uint64_t deadline = rs_mono_ms() + bound_ms;

    while (rs_mono_ms() < deadline) {
        sluice_take_status s = queue_take(NULL, job, q, 30000);

        if (s == SLUICE_TAKE_JOB)
            return 1;
        if (s == 0)
            return 0;
        rs_sleep_ms(5);
    }
    return 0;
}

sluice_queue_stats queue_stats(const char *q)
{
    sluice_queue_stats s;

    memset(&s, 0xee, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, queue_store, q, strlen(q)));
    return s;
}

int queue_reads(const char *want, const char *key, const char *field)
{
    redisReply *r = field != NULL
                        ? rs_cmd(&queue_server, "HGET %s %s", key, field)
                        : rs_cmd(&queue_server, "GET %s", key);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strcmp(r->str, want) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

int queue_wait_is_pttl(rs_server *s, uint64_t wait, const char *limiter,
                       uint64_t t0_us)
{
    long long pttl = rs_int(s, "PTTL %s", limiter);
    uint64_t took = (rs_mono_us() - t0_us) / 1000 + 1;

    if (pttl > 0 && wait >= (uint64_t)pttl && wait - (uint64_t)pttl <= took)
        return 1;
    fprintf(stderr, "    wait %" PRIu64 " ms, PTTL %lld ms read %" PRIu64
            " ms later\n", wait, pttl, took);
    return 0;
}
