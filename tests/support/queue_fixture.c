/*
 * queue_fixture.c - the job-queue tests' server, store and helpers
 * (queue_fixture.h).
 */
#include "queue_fixture.h"
#include "test.h"
#include "tls_certs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_server *queue_server;
sluice_store *queue_store;
queue_transport queue_on;
const char *const queue_server_args[] = {"--appendonly", "yes",
                                         "--appendfsync", "always", NULL};

char queue_url[1536];

/* The one server, or the Sentinel setup, whichever queue_on runs on. */
static rs_server server;
static rs_sentinel sentinel;

static const char *const transport_names[] = {"tcp", "tls", "unix",
                                              "sentinel"};

/* ---- Starting and stopping ----------------------------------------------- */

/*
 * Reads "--transport NAME" from 'argv' into queue_on (TCP when absent).
 * 0, or -1 with the reason on stderr for anything else on the line.
 */
static int parse_transport(const char *name, int argc, char **argv)
{
    queue_on = QUEUE_TCP;
    for (int i = 1; i < argc; i++) {
        size_t t = 0;

        if (strcmp(argv[i], "--transport") != 0 || i + 1 >= argc) {
            fprintf(stderr, "%s: usage: %s [--transport tcp|tls|unix|"
                    "sentinel] (not '%s')\n", name, name, argv[i]);
            return -1;
        }
        i++;
        while (t < 4 && strcmp(argv[i], transport_names[t]) != 0)
            t++;
        if (t == 4) {
            fprintf(stderr, "%s: unknown transport '%s' (tcp, tls, unix or "
                    "sentinel)\n", name, argv[i]);
            return -1;
        }
        queue_on = (queue_transport)t;
    }
    return 0;
}

/*
 * Starts what queue_on runs on, points queue_server at the node that takes
 * raw commands (the master), and writes the store's URL. 0 or -1.
 */
static int start_servers(void)
{
    const rs_certs *c;

    switch (queue_on) {
    case QUEUE_TLS:
        if ((c = rs_certs_get()) == NULL ||
            rs_start_tls(&server, "yes", queue_server_args) < 0)
            return -1;
        snprintf(queue_url, sizeof(queue_url),
                 "%s?tls_ca=%s&tls_cert=%s&tls_key=%s&timeout=3000",
                 server.url, c->ca_cert, c->client_cert, c->client_key);
        break;
    case QUEUE_SENTINEL:
        if (rs_sentinel_start(&sentinel, queue_server_args, NULL) < 0 ||
            (queue_server = rs_sentinel_master(&sentinel)) == NULL)
            return -1;
        snprintf(queue_url, sizeof(queue_url), "%s?timeout=3000",
                 sentinel.url);
        return 0;
    case QUEUE_UNIX:
        if (rs_start_unix(&server, queue_server_args) < 0)
            return -1;
        snprintf(queue_url, sizeof(queue_url), "%s?timeout=3000",
                 server.url);
        break;
    default:
        if (rs_start(&server, queue_server_args) < 0)
            return -1;
        snprintf(queue_url, sizeof(queue_url), "%s?timeout=3000",
                 server.url);
        break;
    }
    queue_server = &server;
    return 0;
}

int queue_start(const char *name, int argc, char **argv)
{
    if (parse_transport(name, argc, argv) < 0)
        return -1;
    if (start_servers() < 0) {
        fprintf(stderr, "%s: cannot start the servers for %s\n", name,
                transport_names[queue_on]);
        queue_stop();
        return -1;
    }
    printf("%s: over %s, %s (master pid %d), AOF, fsync always\n", name,
           transport_names[queue_on], queue_url, (int)queue_server->pid);
    if (sluice_store_open(&queue_store, queue_url, NULL) != 0) {
        fprintf(stderr, "%s: %s\n", name, sluice_last_error());
        queue_stop();
        return -1;
    }
    return 0;
}

void queue_stop(void)
{
    queue_clock_stop();
    sluice_store_free(queue_store);
    queue_store = NULL;
    queue_server = NULL;
    if (queue_on == QUEUE_SENTINEL)
        rs_sentinel_stop(&sentinel);
    else
        rs_stop(&server);
}

/* ---- The caller's clock --------------------------------------------------- */

sluice_vclock *queue_vclock;
static sluice_store *server_clock_store; /* queue_store while it is put by */

int queue_clock_start(uint64_t start_ms)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    char url[sizeof(queue_url) + 16];
    sluice_store *st = NULL;

    if (!CHECK(server_clock_store == NULL) ||
        !CHECK_OK(sluice_vclock_new(&queue_vclock, start_ms)))
        return -1;
    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = queue_vclock;
    snprintf(url, sizeof(url), "%s&clock=caller", queue_url);
    if (!CHECK_OK(sluice_store_open(&st, url, &o))) {
        sluice_vclock_free(queue_vclock);
        queue_vclock = NULL;
        return -1;
    }
    server_clock_store = queue_store;
    queue_store = st;
    return 0;
}

void queue_clock_stop(void)
{
    if (server_clock_store == NULL)
        return;
    sluice_store_free(queue_store);
    queue_store = server_clock_store;
    server_clock_store = NULL;
    sluice_vclock_free(queue_vclock);
    queue_vclock = NULL;
}

/* ---- Helpers ------------------------------------------------------------- */

void queue_fresh(const char *what)
{
    test_context("%s", what);
    if (!CHECK(rs_ok(queue_server, "FLUSHALL") == 0))
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
                        ? rs_cmd(queue_server, "HGET %s %s", key, field)
                        : rs_cmd(queue_server, "GET %s", key);
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
