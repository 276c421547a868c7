/*
 * stores.c - stores opened for a test, and the keys they write (stores.h).
 */
#include "stores.h"
#include "server.h"
#include "test.h"
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sluice_store *test_store_open(const char *base, const char *query,
                              const sluice_store_opts *opts)
{
    sluice_store *st = NULL;
    char url[600];

    /* A base with a query of its own (TLS options) takes the rest after
       an '&'. */
    snprintf(url, sizeof(url), "%s%s%s", base,
             query[0] == '\0' ? "" : strchr(base, '?') ? "&" : "?", query);
    CHECK_OK(sluice_store_open(&st, url, opts));
    if (st == NULL)
        exit(2);
    return st;
}

int test_module_glue(rs_server *s, sluice_algo algo)
{
    const char *name = sluice_algo_name(algo);
    redisReply *r = rs_cmd(s, "SLUICE.HIT sluice-glue-probe %s 1 1000 PEEK",
                           name);
    char lacks[96];
    int has = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 4;

    /* Only the module's own words for an algorithm without glue skip its
       runs; any other answer is a failure, never a skip. */
    snprintf(lacks, sizeof(lacks), "ERR sluice: no module glue for "
             "algorithm %s", name);
    if (!has && r != NULL && r->type == REDIS_REPLY_ERROR &&
        strcmp(r->str, lacks) == 0)
        printf("  NOTE: the module on %s does not decide %s (%s): its "
               "module runs are skipped\n", s->url, name, r->str);
    else if (!CHECK(has))
        fprintf(stderr, "    the module on %s answered SLUICE.HIT of %s "
                "with %s\n", s->url, name,
                r == NULL ? "nothing" : r->type == REDIS_REPLY_ERROR
                                            ? r->str : "another reply");
    if (r != NULL)
        freeReplyObject(r);
    return has;
}

sluice_vclock *test_vclock_opts(sluice_store_opts *opts, uint64_t start_ms)
{
    sluice_vclock *clock = NULL;

    CHECK_OK(sluice_vclock_new(&clock, start_ms));
    if (clock == NULL)
        exit(2);
    opts->clock_ms = sluice_vclock_now_ms;
    opts->clock_payload = clock;
    return clock;
}

sluice_store *test_caller_store(sluice_vclock **clock, const char *url,
                                uint64_t start_ms)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    *clock = test_vclock_opts(&opts, start_ms);
    return test_store_open(url, TEST_CALLER_QUERY, &opts);
}

size_t test_key_of(char *out, size_t cap, const char *prefix, const char *id,
                   size_t id_len, const char *suffix)
{
    size_t len;

    if (sluice__key_build(out, cap - 1, &len, prefix, id, id_len, suffix) !=
        out)
        exit(2);
    out[len] = '\0';
    return len;
}

unsigned test_slot_of_id(const char *id)
{
    char k[128];
    size_t len = test_key_of(k, sizeof(k), "sluice", id, strlen(id),
                             sluice_algo_name((sluice_algo)0));

    return sluice__key_slot(k, len);
}

unsigned test_slot_of_queue(const char *name)
{
    char k[128];
    size_t len = test_key_of(k, sizeof(k), "emq", name, strlen(name),
                             "limiter");

    return sluice__key_slot(k, len);
}

void test_check_engine_used(sluice_store *st, const char *engine)
{
    sluice_store_stats stats;

    CHECK_OK(sluice_store_stats_get(&stats, st));
    if (strcmp(engine, "module") == 0)
        CHECK(stats.module_calls > 0);
    else
        CHECK_EQ_U64(stats.module_calls, 0);
}

int test_hit_timed(sluice_decision *d, sluice_store *st,
                   const sluice_limit *limit, uint64_t *ms)
{
    uint64_t t0 = rs_mono_ms();
    int rc;

    memset(d, 0x5a, sizeof(*d));
    rc = sluice_hit(d, st, limit, "k", 1, 1);
    *ms = rs_mono_ms() - t0;
    return rc;
}
