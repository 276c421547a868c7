/*
 * hit.c - SLUICE.HIT, SLUICE.HITMANY and SLUICE.RESET: their arguments,
 * checked before anything is read or written, and the dispatch of each
 * request to its algorithm's glue (glue.h).
 *
 *   SLUICE.HIT key algo max window_ms [COST n] [BURST b] [PEEK] [NOW ms]
 *   SLUICE.HITMANY algo max window_ms [BURST b] [PEEK] [NOW ms]
 *                  KEYS key cost [key cost ...]
 *   SLUICE.RESET key [key ...]
 *
 * The replies are the scripts' (src/algo/prelude.lua): four integers a
 * request, allowed (1, 0; -1 for a foreign key in HITMANY), remaining,
 * retry_after_ms, reset_after_ms.
 */
#include "module/module.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- Replies and arguments ------------------------------------------------- */

int sluice__mod_error(RedisModuleCtx *ctx, const char *fmt, ...)
{
    char msg[512];
    int at = snprintf(msg, sizeof(msg), "ERR sluice: ");
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg + at, sizeof(msg) - (size_t)at, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p != '\0'; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            *p = '?';
    RedisModule_ReplyWithError(ctx, msg);
    return REDISMODULE_OK;
}

/* At most 40 bytes of 'arg' for a message ("..." beyond; a NUL as '?'). */
static void shown(char *buf, size_t cap, const RedisModuleString *arg)
{
    size_t len, n, i;
    const char *s = RedisModule_StringPtrLen(arg, &len);

    n = len > 40 ? 40 : len;
    if (n + 4 > cap)
        n = cap - 4;
    for (i = 0; i < n; i++)
        buf[i] = s[i] == '\0' ? '?' : s[i];
    snprintf(buf + n, cap - n, "%s", len > n ? "..." : "");
}

int sluice__mod_number(RedisModuleCtx *ctx, const RedisModuleString *arg,
                       const char *what, uint64_t lo, uint64_t hi,
                       uint64_t *out)
{
    size_t len;
    const char *s = RedisModule_StringPtrLen(arg, &len);
    char got[48];

    if (sluice__parse_u64(s, len, lo, hi, out) == 0)
        return 0;
    shown(got, sizeof(got), arg);
    sluice__mod_error(ctx, "%s must be a whole number from %llu to %llu "
                      "(decimal digits, no sign), got '%s'", what,
                      (unsigned long long)lo, (unsigned long long)hi, got);
    return -1;
}

bool sluice__mod_is(const RedisModuleString *arg, const char *word)
{
    size_t len;
    const char *s = RedisModule_StringPtrLen(arg, &len);

    return len == strlen(word) && strncasecmp(s, word, len) == 0;
}

/* The module's half of every token: a random seed in hex, made once. */
static char token_prefix[16];
static uint64_t token_next;

size_t sluice__mod_token(char *buf)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t n = token_next++;
    size_t len = sizeof(token_prefix);
    char tail[16];
    int k = 0;

    if (token_prefix[0] == '\0') {
        uint64_t seed = sluice__random_seed();

        for (int i = 0; i < 16; i++)
            token_prefix[i] = hex[(seed >> (60 - 4 * i)) & 15];
    }
    memcpy(buf, token_prefix, len);
    do {
        tail[k++] = hex[n & 15];
        n >>= 4;
    } while (n != 0);
    while (k > 0)
        buf[len++] = tail[--k];
    return len;
}

/* ---- The arguments of a decision ------------------------------------------- */

typedef struct hit_args {
    sluice_limit limit;
    uint64_t cost;    /* SLUICE.HIT's COST, 1 when absent */
    uint64_t now_ms;  /* NOW, or the server's clock */
    uint64_t server_ms; /* the server's clock, read once */
    bool peek;
    bool has_cost, has_burst, has_now;
    int keys_at;      /* SLUICE.HITMANY: argv index of its first key */
} hit_args;

/* Reads the algorithm's public name, in any case. */
static int parse_algo(RedisModuleCtx *ctx, const RedisModuleString *arg,
                      sluice_algo *out)
{
    char known[160] = "", got[48];

    for (unsigned i = 0; i < SLUICE__ALGO_N; i++)
        if (sluice__mod_is(arg, sluice__algos[i]->name)) {
            *out = (sluice_algo)i;
            return 0;
        }
    for (unsigned i = 0; i < SLUICE__ALGO_N; i++)
        snprintf(known + strlen(known), sizeof(known) - strlen(known),
                 "%s%s", i == 0 ? "" : ", ", sluice__algos[i]->name);
    shown(got, sizeof(got), arg);
    sluice__mod_error(ctx, "unknown algorithm '%s' (expected one of %s)", got,
                      known);
    return -1;
}

/* One option with a number: its flag (refused when seen twice), value. */
static int parse_valued(RedisModuleCtx *ctx, RedisModuleString **argv,
                        int argc, int *i, const char *name, bool *seen,
                        uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (*seen)
        return sluice__mod_error(ctx, "%s is given twice", name), -1;
    if (*i + 1 >= argc)
        return sluice__mod_error(ctx, "%s needs a value", name), -1;
    *seen = true;
    *i += 1;
    return sluice__mod_number(ctx, argv[*i], name, lo, hi, out);
}

/*
 * Reads the options from argv[from] on: COST (when 'with_cost'), BURST,
 * PEEK, NOW. 'stop' ("KEYS" or NULL) ends them; returns the index it was
 * found at (argc when absent), or -1 after replying an error.
 */
static int parse_options(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc, int from, bool with_cost, const char *stop,
                         hit_args *a)
{
    int i;

    for (i = from; i < argc; i++) {
        const RedisModuleString *opt = argv[i];
        char got[48];
        int rc = 0;

        if (stop != NULL && sluice__mod_is(opt, stop))
            return i;
        if (sluice__mod_is(opt, "PEEK")) {
            if (a->peek)
                return sluice__mod_error(ctx, "PEEK is given twice"), -1;
            a->peek = true;
        } else if (with_cost && sluice__mod_is(opt, "COST")) {
            rc = parse_valued(ctx, argv, argc, &i, "COST", &a->has_cost, 1,
                              SLUICE_MAX_MAX, &a->cost);
        } else if (sluice__mod_is(opt, "BURST")) {
            rc = parse_valued(ctx, argv, argc, &i, "BURST", &a->has_burst, 0,
                              SLUICE_MAX_MAX, &a->limit.burst);
        } else if (sluice__mod_is(opt, "NOW")) {
            rc = parse_valued(ctx, argv, argc, &i, "NOW", &a->has_now, 0,
                              SLUICE_NOW_MAX_MS, &a->now_ms);
        } else {
            shown(got, sizeof(got), opt);
            return sluice__mod_error(ctx, "unknown option '%s' (expected %s)",
                                     got, with_cost ? "COST, BURST, PEEK or NOW"
                                                    : "BURST, PEEK, NOW or KEYS"),
                   -1;
        }
        if (rc < 0)
            return -1;
    }
    return i;
}

/* algo max window_ms, from argv[at]. */
static int parse_limit(RedisModuleCtx *ctx, RedisModuleString **argv, int at,
                       hit_args *a)
{
    memset(a, 0, sizeof(*a));
    a->cost = 1;
    if (parse_algo(ctx, argv[at], &a->limit.algo) < 0 ||
        sluice__mod_number(ctx, argv[at + 1], "max", 1, SLUICE_MAX_MAX,
                           &a->limit.max) < 0 ||
        sluice__mod_number(ctx, argv[at + 2], "window_ms", 1,
                           SLUICE_WINDOW_MAX_MS, &a->limit.window_ms) < 0)
        return -1;
    return 0;
}

/* The limit and one cost, against every bound of the library. */
static int check_request(RedisModuleCtx *ctx, const hit_args *a,
                         uint64_t cost)
{
    if (sluice__request_check(&a->limit, cost) < 0)
        return sluice__mod_error(ctx, "%s", sluice_last_error()), -1;
    return 0;
}

/* The glue of the limit's algorithm, or an error when it has none. */
static const sluice__module_glue *glue_of(RedisModuleCtx *ctx,
                                          const hit_args *a)
{
    const sluice__module_glue *glue = sluice__module_glues[a->limit.algo];

    if (glue == NULL)
        sluice__mod_error(ctx, "no module glue for algorithm %s",
                          sluice__algos[a->limit.algo]->name);
    return glue;
}

/* ---- The commands -------------------------------------------------------- */

static void reply_decision(RedisModuleCtx *ctx, const sluice_decision *d)
{
    RedisModule_ReplyWithLongLong(ctx, d->allowed);
    RedisModule_ReplyWithLongLong(ctx, (long long)d->remaining);
    RedisModule_ReplyWithLongLong(ctx, (long long)d->retry_after_ms);
    RedisModule_ReplyWithLongLong(ctx, (long long)d->reset_after_ms);
}

/* One request through its glue, with the call's clock and token. */
static int decide_one(RedisModuleCtx *ctx, const sluice__module_glue *glue,
                      const hit_args *a, RedisModuleString *key,
                      uint64_t cost, unsigned place, const char *token,
                      size_t token_len, sluice_decision *d)
{
    sluice__mod_call call = {
        .ctx = ctx, .key = key, .limit = &a->limit, .cost = cost,
        .consume = !a->peek, .now_ms = a->now_ms,
        .server_ms = a->server_ms, .token = token,
        .token_len = token_len, .place = place,
    };

    memset(d, 0, sizeof(*d));
    return glue->decide(&call, d);
}

int sluice__mod_hit(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    const sluice__module_glue *glue;
    sluice_decision d;
    hit_args a;
    char token[40];
    size_t token_len;
    int rc;

    if (argc < 5)
        return sluice__mod_error(ctx, "wrong number of arguments for "
                                 "SLUICE.HIT (expected key algo max window_ms "
                                 "[COST n] [BURST b] [PEEK] [NOW ms])");
    if (parse_limit(ctx, argv, 2, &a) < 0 ||
        parse_options(ctx, argv, argc, 5, true, NULL, &a) < 0 ||
        check_request(ctx, &a, a.cost) < 0 || (glue = glue_of(ctx, &a)) == NULL)
        return REDISMODULE_OK;
    a.server_ms = (uint64_t)RedisModule_Milliseconds();
    if (!a.has_now)
        a.now_ms = a.server_ms;
    token_len = sluice__mod_token(token);
    rc = decide_one(ctx, glue, &a, argv[1], a.cost, 1, token, token_len, &d);
    if (rc == SLUICE__MODULE_FOREIGN) {
        char msg[200];

        snprintf(msg, sizeof(msg), "WRONGTYPE sluice: the key holds something "
                 "%s never writes there (it keeps %s)",
                 sluice__algos[a.limit.algo]->name,
                 sluice__algo_servers[a.limit.algo]->value);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    if (rc < 0)
        return sluice__mod_error(ctx, "%s: %s", sluice_strerror(rc),
                                 sluice_last_error());
    RedisModule_ReplyWithArray(ctx, 4);
    reply_decision(ctx, &d);
    return REDISMODULE_OK;
}

/* HITMANY's key/cost pairs, all checked before any is decided. */
static int check_pairs(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc, const hit_args *a)
{
    int n = argc - a->keys_at;
    uint64_t cost;

    if (a->keys_at > argc)
        return sluice__mod_error(ctx, "KEYS key cost [key cost ...] is "
                                 "missing"), -1;
    if (n == 0 || n % 2 != 0)
        return sluice__mod_error(ctx, "KEYS needs key cost pairs (got %d "
                                 "argument%s after KEYS)", n,
                                 n == 1 ? "" : "s"), -1;
    for (int i = a->keys_at + 1; i < argc; i += 2)
        if (sluice__mod_number(ctx, argv[i], "cost", 1, SLUICE_MAX_MAX,
                               &cost) < 0 ||
            check_request(ctx, a, cost) < 0)
            return -1;
    return 0;
}

/*
 * HITMANY's keys for the server's getkeys-api: every other argument after
 * the first "KEYS" from argv[1] on, as its key spec says. Redis 7.0 routes a
 * cluster call by this (its cluster code reads no keyword key spec).
 */
static int hitmany_keys(RedisModuleCtx *ctx, RedisModuleString **argv,
                        int argc)
{
    int at = 1;

    while (at < argc && !sluice__mod_is(argv[at], "KEYS"))
        at++;
    for (int i = at + 1; i < argc; i += 2)
        RedisModule_KeyAtPos(ctx, i);
    return REDISMODULE_OK;
}

int sluice__mod_hitmany(RedisModuleCtx *ctx, RedisModuleString **argv,
                        int argc)
{
    const sluice__module_glue *glue;
    hit_args a;
    char token[40];
    size_t token_len;
    sluice_decision small[16], *d;
    int at, n, rc = 0;

    if (RedisModule_IsKeysPositionRequest(ctx))
        return hitmany_keys(ctx, argv, argc);
    if (argc < 4)
        return sluice__mod_error(ctx, "wrong number of arguments for "
                                 "SLUICE.HITMANY (expected algo max window_ms "
                                 "[BURST b] [PEEK] [NOW ms] KEYS key cost "
                                 "[key cost ...])");
    if (parse_limit(ctx, argv, 1, &a) < 0 ||
        (at = parse_options(ctx, argv, argc, 4, false, "KEYS", &a)) < 0)
        return REDISMODULE_OK;
    a.keys_at = at + 1;
    if (check_pairs(ctx, argv, argc, &a) < 0 ||
        (glue = glue_of(ctx, &a)) == NULL)
        return REDISMODULE_OK;
    a.server_ms = (uint64_t)RedisModule_Milliseconds();
    if (!a.has_now)
        a.now_ms = a.server_ms;
    token_len = sluice__mod_token(token);
    n = (argc - a.keys_at) / 2;
    d = n <= (int)(sizeof(small) / sizeof(small[0]))
            ? small
            : RedisModule_Alloc(sizeof(*d) * (size_t)n);
    for (int i = 0; i < n && rc >= 0; i++) {
        uint64_t cost = 1;
        size_t len;
        const char *text = RedisModule_StringPtrLen(argv[a.keys_at + 2 * i + 1],
                                                    &len);

        /* Checked by check_pairs(): it reads. */
        sluice__parse_u64(text, len, 1, SLUICE_MAX_MAX, &cost);
        rc = decide_one(ctx, glue, &a, argv[a.keys_at + 2 * i], cost,
                        (unsigned)i + 1, token, token_len, &d[i]);
        if (rc == SLUICE__MODULE_FOREIGN) {
            d[i] = (sluice_decision){.allowed = -1};
            rc = 0;
        }
    }
    /* As the script: a request that fails ends the call with its error;
       those before it keep what they counted, those after it are not
       decided. */
    if (rc < 0) {
        sluice__mod_error(ctx, "%s", sluice_strerror(rc));
    } else {
        RedisModule_ReplyWithArray(ctx, (long)n * 4);
        for (int i = 0; i < n; i++)
            reply_decision(ctx, &d[i]);
    }
    if (d != small)
        RedisModule_Free(d);
    return REDISMODULE_OK;
}

int sluice__mod_reset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    long long deleted = 0;

    if (argc < 2)
        return sluice__mod_error(ctx, "wrong number of arguments for "
                                 "SLUICE.RESET (expected key [key ...])");
    for (int i = 1; i < argc; i++) {
        RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[i],
                                                  REDISMODULE_WRITE);

        if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
            RedisModule_DeleteKey(key);
            /* As DEL: the key signalled modified, "del" fired. */
            RedisModule_SignalModifiedKey(ctx, argv[i]);
            RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC,
                                            "del", argv[i]);
            RedisModule_Replicate(ctx, "DEL", "s", argv[i]);
            deleted++;
        }
        RedisModule_CloseKey(key);
    }
    return RedisModule_ReplyWithLongLong(ctx, deleted);
}
