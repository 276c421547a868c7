/*
 * decide_args.c - the arguments of a decision call on a server.
 *
 * A call decides n requests of one limit: EVALSHA of the algorithm's
 * script (its arguments in src/algo/prelude.lua) or, where the node's
 * module decides the algorithm (engine.c), SLUICE.HITMANY with the same
 * keys (its arguments in docs/module.md). Both answer the same flat
 * reply (decide_reply.c). The arguments are laid out in one block, the
 * key names built in place, so a call costs one allocation at most.
 */
#include "valkey/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sluice__vk_args_free(sluice__vk_args *g, size_t n)
{
    for (size_t i = 0; i < n && g->block != NULL; i++) {
        const char *k = g->argv[g->key0 + g->kstep * i];

        if (k != NULL && k != g->keys[i])
            free((char *)k);
    }
    if (g->on_heap)
        free(g->block);
    memset(g, 0, sizeof(*g));
}

/* Lays out the block of 'g' for 'n' requests: every pointer, then the
   keys' and numbers' room. */
static int args_alloc(sluice__vk_args *g, void *stack, size_t stack_cap,
                      size_t n)
{
    size_t argc = 10 + 2 * n; /* the module's, at most; a script's 9 + 2n */
    size_t need = argc * (sizeof(char *) + sizeof(size_t)) +
                  n * SLUICE__VK_KEY_BUF + (5 + n) * 24;

    g->argc = (int)argc;
    g->key0 = 3;
    g->kstep = 1;
    g->on_heap = need > stack_cap;
    g->block = g->on_heap ? calloc(1, need) : memset(stack, 0, need);
    if (g->block == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
    g->argv = g->block;
    g->lens = (size_t *)(g->argv + argc);
    g->keys = (char (*)[SLUICE__VK_KEY_BUF])(g->lens + argc);
    g->nums = (char (*)[24])(g->keys + n);
    return SLUICE_OK;
}

/* Sets argument 'j' of 'g' to the number 'v', written into 'buf'. */
static void arg_u64(sluice__vk_args *g, size_t j, char *buf, uint64_t v)
{
    g->argv[j] = buf;
    g->lens[j] = sluice__u64_text(buf, v);
}

/* Sets argument 'j' of 'g' to the literal 'text'. */
static void arg_text(sluice__vk_args *g, size_t j, const char *text)
{
    g->argv[j] = text;
    g->lens[j] = strlen(text);
}

/* Sets key i of 'g' to request q's key name. */
static int arg_key(sluice__vk_args *g, size_t i, sluice__vk_store *v,
                   const sluice__algo *algo, const sluice_request *q)
{
    size_t j = g->key0 + g->kstep * i;

    g->argv[j] = sluice__key_build(g->keys[i], SLUICE__VK_KEY_BUF, &g->lens[j],
                                   v->prefix, q->key, q->key_len, algo->name);
    if (g->argv[j] == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    return SLUICE_OK;
}

/* The arguments of SLUICE.HITMANY (see sluice__vk_args), in the laid out
   'g'. */
static int args_module(sluice__vk_args *g, sluice__vk_store *v,
                       const sluice_limit *limit, bool consume,
                       const sluice_request *reqs, const size_t *todo, size_t n)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    size_t j = 0, now_len = 0, token_len = 0;
    int err;

    arg_text(g, j++, "SLUICE.HITMANY");
    arg_text(g, j++, algo->name);
    arg_u64(g, j++, g->nums[1], limit->max);
    arg_u64(g, j++, g->nums[2], limit->window_ms);
    if (limit->burst != 0) {
        arg_text(g, j++, "BURST");
        arg_u64(g, j++, g->nums[4], limit->burst);
    }
    if (!consume)
        arg_text(g, j++, "PEEK");
    if ((err = sluice__vk_now_token(v, g->nums[3], &now_len, g->token,
                                    &token_len)) < 0)
        return err;
    if (now_len > 0) { /* clock=caller */
        arg_text(g, j++, "NOW");
        g->argv[j] = g->nums[3];
        g->lens[j++] = now_len;
    }
    arg_text(g, j++, "KEYS");
    g->key0 = j;
    g->kstep = 2;
    for (size_t i = 0; i < n; i++) {
        if ((err = arg_key(g, i, v, algo, &reqs[todo[i]])) < 0)
            return err;
        arg_u64(g, j + 2 * i + 1, g->nums[5 + i], reqs[todo[i]].cost);
    }
    g->argc = (int)(j + 2 * n);
    return SLUICE_OK;
}

int sluice__vk_args_build(sluice__vk_args *g, void *stack, size_t stack_cap,
                          sluice__vk_store *v, const sluice_limit *limit,
                          bool consume, const sluice_request *reqs,
                          const size_t *todo, size_t n, bool module)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    size_t j = 3 + n;
    int err = args_alloc(g, stack, stack_cap, n);

    if (err < 0)
        return err;
    if (module)
        return args_module(g, v, limit, consume, reqs, todo, n);
    g->argc = (int)(9 + 2 * n);
    g->argv[0] = "EVALSHA";
    g->lens[0] = 7;
    g->argv[1] = sluice__algo_scripts[limit->algo]->sha1;
    g->lens[1] = 40;
    arg_u64(g, 2, g->nums[0], n);
    for (size_t i = 0; i < n; i++)
        if ((err = arg_key(g, i, v, algo, &reqs[todo[i]])) < 0)
            return err;
    arg_u64(g, j++, g->nums[1], limit->max);
    arg_u64(g, j++, g->nums[2], limit->window_ms);
    g->argv[j] = consume ? "1" : "0";
    g->lens[j++] = 1;
    g->argv[j] = g->nums[3];
    g->argv[j + 1] = g->token;
    if ((err = sluice__vk_now_token(v, g->nums[3], &g->lens[j], g->token,
                                    &g->lens[j + 1])) < 0)
        return err;
    j += 2;
    for (size_t i = 0; i < n; i++)
        arg_u64(g, j++, g->nums[5 + i], reqs[todo[i]].cost);
    arg_u64(g, j, g->nums[4], sluice__limit_burst(limit));
    return SLUICE_OK;
}

int sluice__vk_now_token(sluice__vk_store *v, char *now, size_t *now_len,
                         char *token, size_t *token_len)
{
    *now_len = 0; /* "": the server's clock */
    if (v->caller_clock) {
        uint64_t t = v->clock_ms(v->clock_payload);

        if (t > SLUICE_NOW_MAX_MS)
            return sluice__error(SLUICE_ERANGE,
                                 "the clock reads %llu ms, beyond 2^53",
                                 (unsigned long long)t);
        *now_len = sluice__u64_text(now, t);
    }
    *token_len = (size_t)snprintf(
        token, 40, "%016llx%llx", (unsigned long long)v->token_seed,
        (unsigned long long)atomic_fetch_add(&v->token_next, 1));
    return SLUICE_OK;
}
