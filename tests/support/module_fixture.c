/*
 * module_fixture.c - see module_fixture.h.
 */
#include "module_fixture.h"

#include "algo/algo.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_MAX_ARGS 96

int mf_start(rs_server *s, const char *const *extra)
{
    const char *args[RS_MAX_EXTRA + 3];
    int n = 0;

    if (rs_module_path() == NULL) {
        fprintf(stderr, "module_fixture: this build has no sluice.so\n");
        return -1;
    }
    args[n++] = "--loadmodule";
    args[n++] = rs_module_path();
    for (int i = 0; extra != NULL && extra[i] != NULL && n < RS_MAX_EXTRA; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    if (rs_start(s, args) < 0)
        return -1;
    for (unsigned i = 0; i < SLUICE__ALGO_N; i++) {
        const sluice__script *sc = sluice__algo_scripts[i];
        redisReply *r = rs_cmd(s, "SCRIPT LOAD %b", sc->text, sc->len);
        int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
                 strcmp(r->str, sc->sha1) == 0;

        if (r != NULL)
            freeReplyObject(r);
        if (!ok) {
            fprintf(stderr, "module_fixture: cannot load script %s\n",
                    sc->name);
            return -1;
        }
    }
    return 0;
}

/* An argument list being built: strings copied into 'buf'. */
typedef struct args {
    const char *argv[MF_MAX_ARGS];
    size_t lens[MF_MAX_ARGS];
    int n;
    char buf[MF_MAX_ARGS][48];
} args;

static void add(args *a, const char *s)
{
    if (a->n >= MF_MAX_ARGS)
        return;
    a->argv[a->n] = s;
    a->lens[a->n] = strlen(s);
    a->n++;
}

static void add_u64(args *a, uint64_t v)
{
    if (a->n >= MF_MAX_ARGS)
        return;
    snprintf(a->buf[a->n], sizeof(a->buf[0]), "%llu", (unsigned long long)v);
    add(a, a->buf[a->n]);
}

int mf_read_figures(redisReply *r, long long *fig, int n, char *message,
                    size_t cap)
{
    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(message, cap, "%s", r->str);
        return 1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)(4 * n))
        return -1;
    for (int i = 0; i < 4 * n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return -1;
        fig[i] = r->element[i]->integer;
    }
    return 0;
}

/* The options of a request after its limit, as the module takes them. */
static void add_module_options(args *a, const mf_request *rq)
{
    if (rq->burst != 0) {
        add(a, "BURST");
        add_u64(a, rq->burst);
    }
    if (rq->peek)
        add(a, "PEEK");
    if (rq->now_ms >= 0) {
        add(a, "NOW");
        add_u64(a, (uint64_t)rq->now_ms);
    }
}

static int answer_of(redisReply *r, mf_answer *out, bool module)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = mf_read_figures(r, out->fig, 1, out->message, sizeof(out->message));
    if (r != NULL)
        freeReplyObject(r);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        out->foreign = module && strncmp(out->message, "WRONGTYPE", 9) == 0;
        out->error = !out->foreign;
    } else if (!module && out->fig[0] == -1) {
        out->foreign = true;
    }
    if (out->foreign)
        memset(out->fig, 0, sizeof(out->fig));
    return 0;
}

int mf_module_hit(rs_server *s, const char *key, const mf_request *rq,
                  mf_answer *out)
{
    static args a;

    a.n = 0;
    add(&a, "SLUICE.HIT");
    add(&a, key);
    add(&a, sluice_algo_name(rq->algo));
    add_u64(&a, rq->max);
    add_u64(&a, rq->window_ms);
    add(&a, "COST");
    add_u64(&a, rq->cost);
    add_module_options(&a, rq);
    return answer_of(rs_cmdargv(s, a.n, a.argv, a.lens), out, true);
}

/* EVALSHA of the algorithm's script on keys[0..n), as prelude.lua reads
   its arguments. */
static redisReply *script_call(rs_server *s, const char *const *keys,
                               const uint64_t *costs, int n,
                               const mf_request *rq, const char *token)
{
    static args a;

    a.n = 0;
    add(&a, "EVALSHA");
    add(&a, sluice__algo_scripts[rq->algo]->sha1);
    add_u64(&a, (uint64_t)n);
    for (int i = 0; i < n; i++)
        add(&a, keys[i]);
    add_u64(&a, rq->max);
    add_u64(&a, rq->window_ms);
    add(&a, rq->peek ? "0" : "1");
    if (rq->now_ms >= 0)
        add_u64(&a, (uint64_t)rq->now_ms);
    else
        add(&a, "");
    add(&a, token);
    for (int i = 0; i < n; i++)
        add_u64(&a, costs[i]);
    if (rq->burst != 0)
        add_u64(&a, rq->burst);
    return rs_cmdargv(s, a.n, a.argv, a.lens);
}

int mf_script_hit(rs_server *s, const char *key, const mf_request *rq,
                  const char *token, mf_answer *out)
{
    return answer_of(script_call(s, &key, &rq->cost, 1, rq, token), out,
                     false);
}

int mf_module_hitmany(rs_server *s, const char *const *keys,
                      const uint64_t *costs, int n, const mf_request *rq,
                      long long *out, char *message, size_t cap)
{
    static args a;
    redisReply *r;
    int rc;

    a.n = 0;
    add(&a, "SLUICE.HITMANY");
    add(&a, sluice_algo_name(rq->algo));
    add_u64(&a, rq->max);
    add_u64(&a, rq->window_ms);
    add_module_options(&a, rq);
    add(&a, "KEYS");
    for (int i = 0; i < n; i++) {
        add(&a, keys[i]);
        add_u64(&a, costs[i]);
    }
    r = rs_cmdargv(s, a.n, a.argv, a.lens);
    rc = mf_read_figures(r, out, n, message, cap);
    if (r != NULL)
        freeReplyObject(r);
    return rc == 0 ? 0 : -1;
}

int mf_script_hitmany(rs_server *s, const char *const *keys,
                      const uint64_t *costs, int n, const mf_request *rq,
                      const char *token, long long *out, char *message,
                      size_t cap)
{
    redisReply *r = script_call(s, keys, costs, n, rq, token);
    int rc = mf_read_figures(r, out, n, message, cap);

    if (r != NULL)
        freeReplyObject(r);
    return rc == 0 ? 0 : -1;
}

static int cmp_pairs(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the elements of 'r' (sorted as "field=value" pairs when
   'pairs') to 'out'. */
static void dump_elements(const redisReply *r, bool pairs, char *out,
                          size_t cap)
{
    char *items[256];
    size_t n = 0, step = pairs ? 2 : 1;

    for (size_t i = 0; i + step - 1 < r->elements && n < 256; i += step) {
        items[n] = calloc(1, 600);
        if (items[n] == NULL)
            break;
        test_append_escaped(items[n], 600, r->element[i]->str, r->element[i]->len);
        if (pairs) {
            test_append_escaped(items[n], 600, "=", 1);
            test_append_escaped(items[n], 600, r->element[i + 1]->str,
                           r->element[i + 1]->len);
        }
        n++;
    }
    if (pairs)
        qsort(items, n, sizeof(items[0]), cmp_pairs);
    for (size_t i = 0; i < n; i++) {
        size_t at = strlen(out);

        snprintf(out + at, cap - at, "%s%s", i == 0 ? "" : " ", items[i]);
        free(items[i]);
    }
}

int mf_state_of(rs_server *s, const char *key, mf_state *out)
{
    redisReply *r = rs_cmd(s, "TYPE %s", key);

    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_STATUS) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    snprintf(out->type, sizeof(out->type), "%s", r->str);
    freeReplyObject(r);
    if (strcmp(out->type, "string") == 0)
        r = rs_cmd(s, "GET %s", key);
    else if (strcmp(out->type, "hash") == 0)
        r = rs_cmd(s, "HGETALL %s", key);
    else if (strcmp(out->type, "zset") == 0)
        r = rs_cmd(s, "ZRANGE %s 0 -1 WITHSCORES", key);
    else
        r = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        test_append_escaped(out->value, sizeof(out->value), r->str, r->len);
    else if (r != NULL && r->type == REDIS_REPLY_ARRAY)
        dump_elements(r, strcmp(out->type, "hash") == 0, out->value,
                      sizeof(out->value));
    if (r != NULL)
        freeReplyObject(r);
    out->pttl = rs_int(s, "PTTL %s", key);
    if (out->pttl == -2) {
        snprintf(out->type, sizeof(out->type), "none");
        out->value[0] = '\0';
    }
    return 0;
}

static bool gone_within(const mf_state *gone, const mf_state *other,
                        long long margin_ms)
{
    return gone->pttl == -2 && other->pttl >= 0 && other->pttl <= margin_ms;
}

bool mf_state_same(const mf_state *a, const mf_state *b, long long margin_ms)
{
    if (gone_within(a, b, margin_ms) || gone_within(b, a, margin_ms))
        return true;
    if (strcmp(a->type, b->type) != 0 || strcmp(a->value, b->value) != 0)
        return false;
    if (a->pttl < 0 || b->pttl < 0)
        return a->pttl == b->pttl;
    return llabs(a->pttl - b->pttl) <= margin_ms;
}
