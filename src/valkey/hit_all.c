/*
 * hit_all.c - sluice_hit_all() on a server: one script call decides every
 * limit of the request (src/algo/all_prelude.lua).
 *
 * Limit i of id I is the key PREFIX ":{" enc(I) "}:" ALGO ":" WINDOW "ms"
 * (src/store/keys.c), e.g. sluice:{user42}:fixed:1000ms: the window tells
 * two limits of one algorithm apart, and the key is never sluice_hit()'s
 * (PREFIX:{I}:ALGO, with no window), so the two calls never share a count.
 * Every key of the call has the same hashtag, so they share a cluster slot
 * and the call goes to one node, redirections followed (cluster.c).
 */
#include "valkey/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const sluice__script sluice__script_hit_all;

void sluice__vk_all_free(sluice__vk_all_args *a)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->argv[3 + i] != NULL && a->argv[3 + i] != a->keys[i])
            free((char *)a->argv[3 + i]);
}

/* Sets argument 'j' of 'a' to the number 'v', written into nums[k]. */
static void arg_u64(sluice__vk_all_args *a, int j, size_t k, uint64_t v)
{
    a->argv[j] = a->nums[k];
    a->lens[j] = sluice__u64_text(a->nums[k], v);
}

/* The keys of limits[0..n) for 'id', at argv[3..3 + n). */
static int args_keys(sluice__vk_all_args *a, const sluice__vk_store *v,
                     const sluice_limit *limits, size_t n, const char *id,
                     size_t id_len)
{
    for (size_t i = 0; i < n; i++) {
        char suffix[64];

        snprintf(suffix, sizeof(suffix), "%s:%llums",
                 sluice_algo_name(limits[i].algo),
                 (unsigned long long)limits[i].window_ms);
        a->argv[3 + i] = sluice__key_build(a->keys[i], SLUICE__VK_KEY_BUF,
                                           &a->lens[3 + i], v->prefix, id,
                                           id_len, suffix);
        if (a->argv[3 + i] == NULL)
            return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    }
    return SLUICE_OK;
}

/* Everything after the keys (all_prelude.lua). */
static int args_rest(sluice__vk_all_args *a, sluice__vk_store *v,
                     const sluice_limit *limits, size_t n, uint64_t cost,
                     bool consume)
{
    int j = 3 + (int)n, err;

    a->argv[j] = "";
    a->lens[j++] = 0;
    a->argv[j] = "";
    a->lens[j++] = 0;
    a->argv[j] = consume ? "1" : "0";
    a->lens[j++] = 1;
    a->argv[j] = a->nums[1];
    a->argv[j + 1] = a->token;
    if ((err = sluice__vk_now_token(v, a->nums[1], &a->lens[j], a->token,
                                    &a->lens[j + 1])) < 0)
        return err;
    j += 2;
    arg_u64(a, j++, 2, cost);
    for (size_t i = 0; i < n; i++) {
        arg_u64(a, j++, 3 + 4 * i, (uint64_t)limits[i].algo);
        arg_u64(a, j++, 4 + 4 * i, limits[i].max);
        arg_u64(a, j++, 5 + 4 * i, limits[i].window_ms);
        arg_u64(a, j++, 6 + 4 * i, limits[i].burst);
    }
    a->argc = j;
    return SLUICE_OK;
}

int sluice__vk_all_build(sluice__vk_all_args *a, sluice__vk_store *v,
                         const sluice_limit *limits, size_t n,
                         const char *key, size_t key_len, uint64_t cost,
                         sluice__all how)
{
    int err;

    memset(a, 0, sizeof(*a));
    a->n = n;
    if ((err = args_keys(a, v, limits, n, key, key_len)) < 0)
        return err;
    if (how == SLUICE__ALL_RESET) {
        a->argv[2] = "DEL";
        a->lens[2] = 3;
        a->argc = 1 + (int)n;
        a->first = 2;
        a->script = NULL;
        return SLUICE_OK;
    }
    if ((err = args_rest(a, v, limits, n, cost, how == SLUICE__ALL_HIT)) < 0)
        return err;
    a->argv[0] = "EVALSHA";
    a->lens[0] = 7;
    a->argv[1] = sluice__script_hit_all.sha1;
    a->lens[1] = 40;
    arg_u64(a, 2, 0, n);
    a->first = 0;
    a->script = &sluice__script_hit_all;
    return SLUICE_OK;
}

int sluice__vk_all_read(const sluice__vk_all_args *a, const redisReply *r,
                        const sluice_limit *limits, uint64_t cost,
                        sluice_decision *each)
{
    size_t n = a->n;

    if (a->script == NULL) /* a reset: DEL's count of keys says nothing */
        return SLUICE_OK;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * n)
        return sluice__error(SLUICE_EPROTO, "valkey: the hit_all script "
                             "answered %s for %zu limits",
                             r->type == REDIS_REPLY_ARRAY ? "another count"
                                                          : "no array", n);
    for (size_t i = 0; i < n; i++) {
        bool foreign = false;
        int err = sluice__vk_reply_decision(r, i, &limits[i], cost, &each[i],
                                            &foreign);

        if (err < 0)
            return err;
        if (foreign)
            return sluice__error(SLUICE_EPROTO, "valkey: %.*s does not hold "
                                 "%s, as sluice writes it there",
                                 (int)a->lens[3 + i], a->argv[3 + i],
                                 sluice__algo_servers[limits[i].algo]->value);
    }
    return SLUICE_OK;
}

int sluice__vk_decide_all(void *impl, const sluice_limit *limits, size_t n,
                          const char *key, size_t key_len, uint64_t cost,
                          sluice__all how, sluice_decision *each)
{
    sluice__vk_store *v = impl;
    sluice__vk_all_args *a = malloc(sizeof(*a));
    redisReply *r = NULL;
    int err;

    if (a == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a script call");
    if ((err = sluice__vk_all_build(a, v, limits, n, key, key_len, cost,
                                    how)) == 0 &&
        (err = sluice__vk_call(v, a->argv[3], a->lens[3], a->script, a->argc,
                               a->argv + a->first, a->lens + a->first,
                               &r)) == 0)
        err = sluice__vk_all_read(a, r, limits, cost, each);
    if (r != NULL)
        freeReplyObject(r);
    sluice__vk_all_free(a);
    free(a);
    return err;
}
