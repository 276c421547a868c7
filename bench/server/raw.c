/*
 * raw.c - bare hiredis calls, without the library: the algorithm's script by
 * EVALSHA (one at a time, or pipelined) and a bare INCR, on the keys the
 * library would use. They show what the library adds to the server's own
 * cost ("where the time goes").
 *
 * To send what the library sends, this file uses two of its private facts,
 * and it is the only file of bench/ that does (src/ is on the include path
 * of this file alone): the server key it makes of an id
 * (sluice__key_build(), src/store/store.h) and each algorithm's script
 * (sluice__algo_scripts[a], src/algo/algo.h). The rest of the benchmark
 * asks for them here: raw_key_build() gives the key sets of the raw rows and
 * the keys whose memory measure.c reads.
 */
#include "bench_server.h"
#include "store/store.h" /* private: key names, the algorithms' scripts */

#include <stdlib.h>
#include <string.h>

/*
 * Writes the server key the library makes of 'id' for 'suffix' (e.g.
 * "sluice:{user:7}:fixed") into 'out' (of 'cap' bytes) and its length into
 * '*len'. Returns 0, or -1 when it does not fit.
 */
int raw_key_build(char *out, size_t cap, size_t *len, const char *id,
                  size_t id_len, const char *suffix)
{
    char *k = sluice__key_build(out, cap, len, "sluice", id, id_len, suffix);

    if (k == out)
        return 0;
    free(k); /* too long: built elsewhere */
    return -1;
}

/* Loads the algorithm's script on the server; its SHA1 into 'sha'. */
int raw_script_load(server *s, sluice_algo algo, char sha[41])
{
    redisReply *r = ctl_cmd(s, "SCRIPT LOAD %s",
                            sluice__algo_scripts[algo]->text);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;

    if (ok)
        memcpy(sha, r->str, 41);
    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/*
 * One raw EVALSHA of the algorithm's script, as the library sends it for
 * one request (the layout at the top of src/algo/prelude.lua).
 */
static void raw_evalsha_args(const caller *w, size_t k, const char **argv,
                             size_t *lens, const char *max,
                             const char *window)
{
    argv[0] = "EVALSHA";
    argv[1] = w->sha;
    argv[2] = "1";
    argv[3] = key_at(w->keys, k);
    argv[4] = max;
    argv[5] = window;
    argv[6] = "1"; /* count it */
    argv[7] = "";  /* the server's clock */
    argv[8] = "0"; /* token (the sliding log's) */
    argv[9] = "1"; /* the request's cost */
    for (int i = 0; i < 10; i++)
        lens[i] = strlen(argv[i]);
    lens[3] = key_len(w->keys, k);
}

/* Reads a raw reply: 1 admitted, 0 refused, -1 error (into w->why). */
static int raw_reply(caller *w, redisReply *r)
{
    int v = -1;

    if (r == NULL)
        snprintf(w->why, sizeof(w->why), "hiredis: %s", w->ctx->errstr);
    else if (r->type == REDIS_REPLY_INTEGER)
        v = 1;
    else if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             r->element[0]->type == REDIS_REPLY_INTEGER)
        v = r->element[0]->integer != 0;
    else
        snprintf(w->why, sizeof(w->why), "unexpected reply: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "of another type");
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/*
 * One EVALSHA of w->sha on key 'k' of w->keys, limit 'max' per 'window'
 * ms: 1 admitted, 0 refused, -1 error (into w->why).
 */
int raw_evalsha(caller *w, size_t k, const char *max, const char *window)
{
    const char *argv[10];
    size_t lens[10];

    raw_evalsha_args(w, k, argv, lens, max, window);
    return raw_reply(w, redisCommandArgv(w->ctx, 10, argv, lens));
}

/* One INCR of key 'k' of w->keys: 1, or -1 on error (into w->why). */
int raw_incr(caller *w, size_t k)
{
    const char *argv[2] = {"INCR", key_at(w->keys, k)};
    size_t lens[2] = {4, key_len(w->keys, k)};

    return raw_reply(w, redisCommandArgv(w->ctx, 2, argv, lens));
}

/*
 * 'depth' pipelined EVALSHAs on keys drawn from w->rng: appended, then their
 * replies read. Adds the admitted ones to '*admitted'; -1 on an error.
 */
int raw_pipelined(caller *w, unsigned depth, const char *max,
                  const char *window, uint64_t *admitted)
{
    const char *argv[10];
    size_t lens[10];
    int bad = 0;

    for (unsigned i = 0; i < depth; i++) {
        size_t k = w->keys->n > 1 ? pick_key(&w->rng, w->keys->n) : 0;

        raw_evalsha_args(w, k, argv, lens, max, window);
        redisAppendCommandArgv(w->ctx, 10, argv, lens);
    }
    for (unsigned i = 0; i < depth; i++) {
        redisReply *r = NULL;
        int v;

        if (redisGetReply(w->ctx, (void **)&r) != REDIS_OK)
            r = NULL;
        if ((v = raw_reply(w, r)) < 0)
            bad = 1;
        else
            *admitted += (uint64_t)v;
        if (r == NULL)
            return -1; /* the connection is gone */
    }
    return bad ? -1 : 0;
}
