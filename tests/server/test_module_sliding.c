/*
 * test_module_sliding.c - sluice.so's three sliding windows
 * (sliding-counter, sliding-log and compact-log) against their scripts, on
 * a real redis-server that loaded the module.
 *
 *   - Twins: for each algorithm, a seeded random trace (several keys, costs
 *     from 1 to max, peeks, HITMANY calls naming a key twice, clock jumps to
 *     exact boundaries -- window starts, the time a past unit leaves, a ms
 *     either side --, clocks that step back, windows changing on a key)
 *     decided by SLUICE.HIT/HITMANY with NOW on one key of each pair and by
 *     the algorithm's script (EVALSHA, ARGV[4] = now) on its twin. The four
 *     figures must be equal at every step, and after every step the two
 *     keys too: type, value (hash fields, sorted-set members and scores,
 *     the string's bytes), and PTTL within a small margin.
 *   - Mixed: module and script take turns on one key, a script alone keeps
 *     a twin: one budget, the same figures and keys.
 *   - Big logs: max up to 2000 and costs up to max, so that a refusal's
 *     rank is far from both ends of the set and a ZADD takes two batches.
 *   - Odd values the scripts take as theirs (extra hash fields, numbers as
 *     Lua reads them, "6e4", "0x2"; a window ahead of the clock, an
 *     infinite one; fractional scores, one ahead of the clock, infinite
 *     ones; an empty string with a TTL; a ring with bytes past its slots,
 *     or a cap above max, wrapping) on twin keys, then a few calls: the
 *     same figures and keys.
 *   - Foreign: a key holding what the algorithm never writes (another type;
 *     for the compact log, strings that are not a ring) is a WRONGTYPE
 *     error from SLUICE.HIT, -1 0 0 0 from SLUICE.HITMANY, as the script
 *     answers, and nothing changes (DUMP and PTTL). A counter hash whose
 *     count is not a number is an error from both, nothing written.
 *   - Effects: a replica started without the module, following a master
 *     with it, ends with the same keys and the same absolute expiries
 *     (PEXPIRETIME); the master's AOF holds no SLUICE command, and a
 *     restart from it gives the same keys and expiries. A refusal or a peek
 *     that trims nothing moves the replication offset not at all.
 *
 * Usage: test_module_sliding [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "module_fixture.h"
#include "rng.h"
#include "server.h"
#include "test.h"

#include "algo/algo.h"

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static rs_server server;

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
/* Two PTTLs read a few commands apart, on a machine that may be loaded. */
#define PTTL_MARGIN_MS 1000
#define GONE_MARGIN_MS 60

typedef struct algo_case {
    const char *name;              /* the public name */
    const sluice__script *script;
} algo_case;

static const algo_case cases[] = {
    {"sliding-counter", &sluice__script_sliding_counter},
    {"sliding-log", &sluice__script_sliding_log},
    {"compact-log", &sluice__script_compact_log},
};

/* ---- Commands ------------------------------------------------------------ */

/* A reply of 4n integers into 'out'; -1 when it is not one (printed). */
static int figures(redisReply *r, size_t n, long long *out)
{
    char message[256] = "";
    int rc = mf_read_figures(r, out, (int)n, message, sizeof(message));

    if (rc != 0)
        fprintf(stderr, "unexpected reply: %s\n",
                rc > 0 ? message : r == NULL ? "none" : "not 4n integers");
    return rc == 0 ? 0 : -1;
}

/* One request of a call. */
typedef struct req {
    char key[64];
    uint64_t cost;
} req;

typedef struct call {
    const algo_case *algo;
    uint64_t max, window_ms, now_ms;
    bool peek;
    size_t n;
    req reqs[4];
} call;

static redisReply *run_argv(rs_server *s, int argc, char **argv)
{
    size_t lens[32];

    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return rs_cmdargv(s, argc, (const char **)argv, lens);
}

/*
 * 'c' through the module: SLUICE.HIT for one request, else SLUICE.HITMANY;
 * each key prefixed with 'prefix'. The reply is the caller's.
 */
static redisReply *by_module(rs_server *s, const call *c, const char *prefix)
{
    char nums[4][24], keys[4][80], costs[4][24], *argv[32];
    int argc = 0;

    snprintf(nums[0], 24, "%" PRIu64, c->max);
    snprintf(nums[1], 24, "%" PRIu64, c->window_ms);
    snprintf(nums[2], 24, "%" PRIu64, c->now_ms);
    for (size_t i = 0; i < c->n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s%s", prefix, c->reqs[i].key);
        snprintf(costs[i], 24, "%" PRIu64, c->reqs[i].cost);
    }
    argv[argc++] = c->n == 1 ? "SLUICE.HIT" : "SLUICE.HITMANY";
    if (c->n == 1)
        argv[argc++] = keys[0];
    argv[argc++] = (char *)c->algo->name;
    argv[argc++] = nums[0];
    argv[argc++] = nums[1];
    if (c->n == 1) {
        argv[argc++] = "COST";
        argv[argc++] = costs[0];
    }
    if (c->peek)
        argv[argc++] = "PEEK";
    argv[argc++] = "NOW";
    argv[argc++] = nums[2];
    if (c->n > 1) {
        argv[argc++] = "KEYS";
        for (size_t i = 0; i < c->n; i++) {
            argv[argc++] = keys[i];
            argv[argc++] = costs[i];
        }
    }
    return run_argv(s, argc, argv);
}

/* 'c' through the script (EVALSHA, the clock in ARGV[4]). */
static redisReply *by_script(rs_server *s, const call *c, const char *prefix)
{
    static unsigned long calls;
    char nums[4][24], keys[4][80], costs[4][24], token[32], *argv[32];
    int argc = 0;

    snprintf(nums[0], 24, "%zu", c->n);
    snprintf(nums[1], 24, "%" PRIu64, c->max);
    snprintf(nums[2], 24, "%" PRIu64, c->window_ms);
    snprintf(nums[3], 24, "%" PRIu64, c->now_ms);
    snprintf(token, sizeof(token), "lua%lu", ++calls);
    argv[argc++] = "EVALSHA";
    argv[argc++] = (char *)c->algo->script->sha1;
    argv[argc++] = nums[0];
    for (size_t i = 0; i < c->n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s%s", prefix, c->reqs[i].key);
        argv[argc++] = keys[i];
    }
    argv[argc++] = nums[1];
    argv[argc++] = nums[2];
    argv[argc++] = c->peek ? "0" : "1";
    argv[argc++] = nums[3];
    argv[argc++] = token;
    for (size_t i = 0; i < c->n; i++) {
        snprintf(costs[i], 24, "%" PRIu64, c->reqs[i].cost);
        argv[argc++] = costs[i];
    }
    return run_argv(s, argc, argv);
}

/* ---- A key's state ------------------------------------------------------- */

/* What a key holds, as one comparable text, and its expiry. */
typedef struct snap {
    char type[16];
    char *text; /* canonical value: sorted entries; NULL for none */
    size_t len;
    long long pttl, expire_at; /* PTTL, PEXPIRETIME */
} snap;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of a hash or sorted set, "x y" a line, sorted, joined. */
static void join_pairs(snap *sn, redisReply *r)
{
    size_t n = r->elements / 2, len = 0;
    char **lines = calloc(n + 1, sizeof(*lines));

    for (size_t i = 0; i < n; i++) {
        const char *m = r->element[2 * i]->str;
        size_t size = strlen(m) + r->element[2 * i + 1]->len + 3;

        lines[i] = malloc(size);
        snprintf(lines[i], size, "%s %s\n", m, r->element[2 * i + 1]->str);
        len += strlen(lines[i]);
    }
    qsort(lines, n, sizeof(*lines), cmp_str);
    sn->text = calloc(len + 1, 1);
    for (size_t i = 0; i < n; i++) {
        strcat(sn->text, lines[i]);
        free(lines[i]);
    }
    sn->len = len;
    free(lines);
}

/* Reads 'key' on 's'. */
static void snap_take(rs_server *s, const char *key, snap *sn)
{
    redisReply *r = rs_cmd(s, "TYPE %s", key);

    memset(sn, 0, sizeof(*sn));
    snprintf(sn->type, sizeof(sn->type), "%s", r ? r->str : "?");
    freeReplyObject(r);
    if (strcmp(sn->type, "string") == 0)
        r = rs_cmd(s, "GET %s", key);
    else if (strcmp(sn->type, "hash") == 0)
        r = rs_cmd(s, "HGETALL %s", key);
    else if (strcmp(sn->type, "zset") == 0)
        r = rs_cmd(s, "ZRANGE %s 0 -1 WITHSCORES", key);
    else if (strcmp(sn->type, "none") != 0)
        r = rs_cmd(s, "DUMP %s", key);
    else
        r = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        sn->text = malloc(r->len + 1);
        memcpy(sn->text, r->str, r->len);
        sn->len = r->len;
    } else if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
        join_pairs(sn, r);
    }
    freeReplyObject(r);
    sn->pttl = rs_int(s, "PTTL %s", key);
    sn->expire_at = rs_int(s, "PEXPIRETIME %s", key);
    if (sn->pttl == -2) { /* expired while it was being read */
        snprintf(sn->type, sizeof(sn->type), "none");
        free(sn->text);
        sn->text = NULL;
        sn->len = 0;
    }
}

static void snap_free(snap *sn)
{
    free(sn->text);
    sn->text = NULL;
}

/* Whether two keys hold the same; 'exact_expiry' compares PEXPIRETIME,
   else PTTL within the margin. */
static bool snap_same(const snap *a, const snap *b, bool exact_expiry)
{
    /* Read one after the other: a key gone may have had but the moment
       between the reads left. */
    if (!exact_expiry &&
        ((a->pttl == -2 && b->pttl >= 0 && b->pttl <= GONE_MARGIN_MS) ||
         (b->pttl == -2 && a->pttl >= 0 && a->pttl <= GONE_MARGIN_MS)))
        return true;
    if (strcmp(a->type, b->type) != 0 || a->len != b->len ||
        (a->len > 0 && memcmp(a->text, b->text, a->len) != 0))
        return false;
    if (exact_expiry)
        return a->expire_at == b->expire_at;
    if ((a->pttl < 0 || b->pttl < 0))
        return a->pttl == b->pttl;
    return llabs(a->pttl - b->pttl) <= PTTL_MARGIN_MS;
}

/* Checks that 'ka' and 'kb' on 's' hold the same. */
static bool check_twins(rs_server *s, const char *ka, const char *kb)
{
    snap a, b;
    bool same;

    snap_take(s, ka, &a);
    snap_take(s, kb, &b);
    same = snap_same(&a, &b, false);
    if (!same)
        fprintf(stderr,
                "  %s: %s pttl %lld [%.*s]\n  %s: %s pttl %lld [%.*s]\n",
                ka, a.type, a.pttl, (int)(a.len > 300 ? 300 : a.len),
                a.text ? a.text : "", kb, b.type, b.pttl,
                (int)(b.len > 300 ? 300 : b.len), b.text ? b.text : "");
    CHECK(same);
    snap_free(&a);
    snap_free(&b);
    return same;
}

/* ---- Random traces ------------------------------------------------------- */

enum { TRACE_KEYS = 4, TRACE_STEPS = 300, PAST = 8, PRINTED = 5 };

static const uint64_t maxes[] = {1, 2, 3, 5, 10, 64};
/* Big logs: refusals whose rank is far from both ends, ZADDs of more than
   one batch. */
static const uint64_t big_maxes[] = {300, 1000, 2000};
static const uint64_t windows[] = {60000, 100000, 3600000};

typedef struct trace {
    const algo_case *algo;
    bool mixed;       /* module and script take turns on one key */
    bool big;         /* big_maxes, and costs up to max more often */
    uint64_t now;
    uint64_t past[PAST]; /* times of recent admissions, any key */
    uint64_t max[TRACE_KEYS], window[TRACE_KEYS];
    long admitted, refused, mismatches;
} trace;

/* The next clock: the same ms, a few ms on, part of a window, a window, the
   next window's start, when a past admission leaves (each of those two a
   ms either side too), a step back, or several windows on. */
static uint64_t next_now(trace *t, uint64_t w)
{
    uint64_t r = rng_below(100), now = t->now, p;

    if (r < 30)
        return now;
    if (r < 50)
        return now + rng_range(1, 5);
    if (r < 62)
        return now + rng_range(1, w - 1);
    if (r < 67)
        return now + w;
    if (r < 77)
        return (now / w + 1) * w + rng_range(0, 2) - 1;
    if (r < 90) {
        p = t->past[rng_below(PAST)] + w + rng_range(0, 2) - 1;
        return p > now ? p : now;
    }
    if (r < 95)
        return now - rng_range(1, w / 2);
    return now + rng_range(2 * w, 5 * w);
}

static uint64_t pick_max(const trace *t)
{
    return t->big ? big_maxes[rng_below(NELEM(big_maxes))]
                  : maxes[rng_below(NELEM(maxes))];
}

/* The next call: one key (HIT) or two or three, a key maybe twice
   (HITMANY), under the first key's limit. */
static void next_call(trace *t, call *c)
{
    unsigned k = (unsigned)rng_below(TRACE_KEYS);

    if (rng_pct(4)) { /* this key's limit changes */
        t->max[k] = pick_max(t);
        t->window[k] = windows[rng_below(NELEM(windows))];
    }
    memset(c, 0, sizeof(*c));
    c->algo = t->algo;
    c->max = t->max[k];
    c->window_ms = t->window[k];
    t->now = next_now(t, c->window_ms);
    c->now_ms = t->now;
    c->peek = rng_pct(15);
    c->n = rng_pct(75) ? 1 : rng_range(2, 3);
    for (size_t i = 0; i < c->n; i++) {
        unsigned ki = i == 0 ? k : (unsigned)rng_below(TRACE_KEYS);

        snprintf(c->reqs[i].key, sizeof(c->reqs[i].key), "%s%s:%u",
                 t->big ? "big:" : "", t->algo->name, ki);
        c->reqs[i].cost = rng_pct(t->big ? 30 : 70) ? 1
                                                     : rng_range(1, c->max);
    }
}

/* One step: the call on both keys of each pair; the figures and keys
   compared. Returns false on a difference. */
static bool step(trace *t, const call *c, long i)
{
    long long a[16], b[16];
    redisReply *ra, *rb;
    bool module_first = !t->mixed || (i & 1) == 0;
    bool ok = true;

    /* Twins: the module on m:, the script on l:. Mixed: module and script
       in turn on x:, the script alone on y:. */
    ra = t->mixed ? (module_first ? by_module(&server, c, "x:")
                                  : by_script(&server, c, "x:"))
                  : by_module(&server, c, "m:");
    rb = by_script(&server, c, t->mixed ? "y:" : "l:");
    ok = CHECK(figures(ra, c->n, a) == 0) && CHECK(figures(rb, c->n, b) == 0);
    freeReplyObject(ra);
    freeReplyObject(rb);
    for (size_t r = 0; ok && r < c->n; r++) {
        for (int f = 0; f < 4; f++)
            ok &= CHECK_EQ_U64(a[4 * r + f], b[4 * r + f]) != 0;
        if (a[4 * r] == 1 && !c->peek) {
            t->past[rng_below(PAST)] = c->now_ms;
            t->admitted++;
        } else if (a[4 * r] == 0) {
            t->refused++;
        }
    }
    for (size_t r = 0; ok && r < c->n; r++) {
        char ka[80], kb[80];

        snprintf(ka, sizeof(ka), "%s%s", t->mixed ? "x:" : "m:",
                 c->reqs[r].key);
        snprintf(kb, sizeof(kb), "%s%s", t->mixed ? "y:" : "l:",
                 c->reqs[r].key);
        ok = check_twins(&server, ka, kb);
    }
    return ok;
}

static void run_trace(const algo_case *algo, bool mixed, bool big,
                      uint64_t seed)
{
    const char *kind = big ? "big" : mixed ? "mixed" : "twins";
    trace t;
    call c;

    memset(&t, 0, sizeof(t));
    t.algo = algo;
    t.mixed = mixed;
    t.big = big;
    t.now = 1700000000000ULL + rng_below(1000000);
    for (unsigned k = 0; k < TRACE_KEYS; k++) {
        t.max[k] = pick_max(&t);
        t.window[k] = windows[rng_below(NELEM(windows))];
    }
    for (long i = 0; i < TRACE_STEPS && t.mismatches < PRINTED; i++) {
        next_call(&t, &c);
        test_context("%s %s seed %" PRIu64 " step %ld: %zu key(s), first "
                     "%s, max %" PRIu64 " window %" PRIu64 " now %" PRIu64
                     " cost %" PRIu64 "%s", algo->name, kind, seed, i, c.n,
                     c.reqs[0].key, c.max, c.window_ms, c.now_ms,
                     c.reqs[0].cost, c.peek ? " peek" : "");
        if (!step(&t, &c, i))
            t.mismatches++;
    }
    test_context(NULL);
    printf("%s %s: %ld admitted, %ld refused, %ld mismatches\n", algo->name,
           kind, t.admitted, t.refused, t.mismatches);
    CHECK(t.admitted > 20 && t.refused > 20);
}

/* ---- Foreign values ------------------------------------------------------ */

/* A 16-byte ring header followed by 'slots' slots of 8 bytes at 'at'. */
static size_t ring_bytes(char *buf, uint32_t head, uint32_t len, uint32_t cap,
                         uint32_t slots, uint64_t at)
{
    uint32_t h[3] = {head, len, cap};

    memcpy(buf, "SLCL", 4);
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++)
            buf[4 + 4 * i + b] = (char)(h[i] >> (8 * b));
    for (uint32_t j = 0; j < slots; j++)
        for (int b = 0; b < 8; b++)
            buf[16 + 8 * j + b] = (char)(at >> (8 * b));
    return 16 + 8 * (size_t)slots;
}

/*
 * Sorted sets that are not a sliding log's (its members carry the running
 * total, sliding_log.lua): foreign value number 'v' (4 on) at times inside
 * the window of test_foreign(), so that nothing is trimmed; false past the
 * last.
 */
static bool log_foreign_value(const char *key, int v)
{
    static const char *const sets[][4] = {
        {"5", "b"},                                  /* any member */
        {"1700000000000", "1700000000000:0a1b:1:1"}, /* an older sluice's */
        {"1699999999000", "A0000000000000001:0"},    /* units 0 */
        {"1699999999000", "A0000000000000001:01"},   /* a leading zero */
        {"1699999999000", "B01000000000000001"},     /* hi with a leading 0 */
        {"1699999999000", "A000000000000001"},       /* 15 digits */
        {"1699999999000", "A00000000000000001"},     /* 17 digits */
        {"1699999999000", "A0000000000000001:2"},    /* fewer than its units */
        {"1699999999000", "A9007199254740992"},      /* lo of 2^53 */
        {"1699999999000", "A0000000000000001x"},     /* a byte after */
        /* the newest is fine, the oldest is not */
        {"1699999999000", "zz", "1699999999500", "A0000000000000002"},
        /* the newest's total before the oldest's start */
        {"1699999999000", "A0000000000000009:3", "1699999999500",
         "A0000000000000002"},
        /* totals more than 2^53 apart */
        {"1699999999000", "A0000000000000001", "1699999999500",
         "B30000000000000001"},
    };
    const char *const *set;

    if (v < 4 || v - 4 >= (int)NELEM(sets))
        return false;
    set = sets[v - 4];
    if (set[2] == NULL)
        return rs_ok(&server, "ZADD %s %s %s", key, set[0], set[1]) == 0;
    return rs_ok(&server, "ZADD %s %s %s %s %s", key, set[0], set[1], set[2],
                 set[3]) == 0;
}

/* Sets 'key' to foreign value number 'v' for 'algo'; false past the last. */
static bool foreign_value(const char *algo, const char *key, int v)
{
    char ring[16 + 8 * 4];
    bool clog = strcmp(algo, "compact-log") == 0;

    rs_ok(&server, "DEL %s", key);
    switch (v) {
    case 0: return rs_ok(&server, "RPUSH %s a b", key) == 0;
    case 1: return rs_ok(&server, "SADD %s a", key) == 0;
    case 2:
        return strcmp(algo, "sliding-counter") == 0
                   ? rs_ok(&server, "SET %s hello", key) == 0
                   : rs_ok(&server, "HSET %s w 60000", key) == 0;
    case 3:
        return strcmp(algo, "sliding-log") == 0
                   ? rs_ok(&server, "SET %s hello", key) == 0
                   : rs_ok(&server, "ZADD %s 5 b", key) == 0;
    }
    if (strcmp(algo, "sliding-log") == 0)
        return log_foreign_value(key, v);
    if (!clog || v > 9)
        return false;
    switch (v) { /* strings that are not a ring */
    case 4: return rs_ok(&server, "SET %s hello", key) == 0;
    case 5: ring_bytes(ring, 0, 1, 4, 1, 5); memcpy(ring, "SLCX", 4);
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)24) == 0;
    case 6: ring_bytes(ring, 0, 0, 4, 0, 5); /* no live unit */
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)16) == 0;
    case 7: ring_bytes(ring, 4, 1, 4, 4, 5); /* head beyond the ring */
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)48) == 0;
    case 8: ring_bytes(ring, 0, 3, 4, 2, 5); /* shorter than its units */
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)32) == 0;
    default: ring_bytes(ring, 0, 5, 4, 4, 5); /* len > cap */
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)48) == 0;
    }
}

/* Every foreign value of 'algo': the module and the script refuse it and
   leave it as it was, TTL included. */
static void test_foreign(const algo_case *algo)
{
    const char *key = "foreign";
    call c = {.algo = algo, .max = 5, .window_ms = 60000,
              .now_ms = 1700000000000ULL, .n = 1, .reqs = {{"foreign", 1}}};

    for (int v = 0; foreign_value(algo->name, key, v); v++) {
        snap before, after;
        redisReply *r;
        long long f[8] = {0};

        test_context("%s foreign value %d", algo->name, v);
        rs_ok(&server, "PEXPIRE %s 500000", key);
        snap_take(&server, key, &before);
        c.n = 1;
        r = by_module(&server, &c, "");
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strncmp(r->str, "WRONGTYPE", 9) == 0);
        freeReplyObject(r);
        c.n = 2; /* HITMANY: the foreign key, then a fresh one */
        snprintf(c.reqs[1].key, sizeof(c.reqs[1].key), "fresh:%s:%d",
                 algo->name, v);
        c.reqs[1].cost = 1;
        r = by_module(&server, &c, "");
        if (CHECK(figures(r, 2, f) == 0))
            CHECK(f[0] == -1 && f[1] == 0 && f[2] == 0 && f[3] == 0 &&
                  f[4] == 1);
        freeReplyObject(r);
        c.n = 1;
        r = by_script(&server, &c, "");
        if (CHECK(figures(r, 1, f) == 0))
            CHECK(f[0] == -1 && f[1] == 0 && f[2] == 0 && f[3] == 0);
        freeReplyObject(r);
        snap_take(&server, key, &after);
        CHECK(snap_same(&before, &after, true));
        snap_free(&before);
        snap_free(&after);
    }
    test_context(NULL);
}

/* ---- Odd values ---------------------------------------------------------- */

#define ODD_T 1700000000000ULL

/*
 * Sets 'key' to odd value number 'v' of 'algo': what sluice never writes
 * but its script takes as its own (extra fields, numbers as Lua reads
 * them, a window ahead of the clock, fractional scores, an empty string,
 * a ring with bytes past its slots or a cap above max). False past the
 * last.
 */
static bool odd_value(const char *algo, const char *key, int v)
{
    uint64_t idx = ODD_T / 60000;
    char ring[16 + 8 * 10];

    rs_ok(&server, "DEL %s", key);
    if (strcmp(algo, "sliding-counter") == 0) {
        switch (v) {
        case 0: return rs_ok(&server, "HSET %s w 60000 i %" PRIu64
                             " c 2 p 1 x other", key, idx) == 0;
        case 1: return rs_ok(&server, "HSET %s w 6e4 i %s c 0x2 p 1.0", key,
                             " 28333333 ") == 0;
        case 2: return rs_ok(&server, "HSET %s w 60000 i %" PRIu64
                             " c 3 p 0", key, idx + 1) == 0;
        case 3: return rs_ok(&server, "HSET %s w 30000 i %" PRIu64
                             " c 2 p 1", key, idx) == 0;
        case 4: return rs_ok(&server, "HSET %s w 60000 i inf c 1 p 1",
                             key) == 0;
        }
        return false;
    }
    if (strcmp(algo, "sliding-log") == 0) {
        switch (v) {
        case 0: return rs_ok(&server, "ZADD %s %" PRIu64 ".5 "
                             "A0000000000000001 %" PRIu64 " A0000000000000002",
                             key, ODD_T - 10, ODD_T - 5) == 0;
        /* ahead of the clock (a fraction there would put the member
           added at the held clock, written whole, before it: a set whose
           ends then disagree, foreign) */
        case 1: return rs_ok(&server, "ZADD %s %" PRIu64
                             " A0000000000000003:3", key, ODD_T + 500) == 0;
        case 2: return rs_ok(&server, "ZADD %s %" PRIu64 " A0000000000000001 "
                             "%" PRIu64 " A0000000000000002", key,
                             ODD_T - 70000, ODD_T - 100) == 0;
        case 3: return rs_ok(&server, "ZADD %s +inf A0000000000000002 -inf "
                             "A0000000000000001", key) == 0;
        /* running totals about 2^53, where the low part wraps: one set
           across it, and one that the calls take across it */
        case 4: return rs_ok(&server, "ZADD %s %" PRIu64 " A9007199254740990:5"
                             " %" PRIu64 " B10000000000000003:5", key,
                             ODD_T - 10, ODD_T - 5) == 0;
        case 5: return rs_ok(&server, "ZADD %s %" PRIu64 " A9007199254740990:2",
                             key, ODD_T - 10) == 0;
        /* a running total's high part of 16 digits */
        case 6: return rs_ok(&server, "ZADD %s %" PRIu64
                             " Q90071992547409910000000000000001", key,
                             ODD_T - 10) == 0;
        }
        return false;
    }
    switch (v) {
    case 0: return rs_ok(&server, "SET %s %b PX 500000", key, "",
                         (size_t)0) == 0;
    case 1: /* two units and a slot past them */
        ring_bytes(ring, 0, 2, 8, 3, ODD_T - 100);
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)40) == 0;
    case 2: /* a ring of 10 (a larger max made it), wrapping */
        ring_bytes(ring, 8, 4, 10, 10, ODD_T - 100);
        return rs_ok(&server, "SET %s %b", key, ring, (size_t)96) == 0;
    }
    return false;
}

/* Each odd value on twin keys, then a few calls: the same figures and
   keys from the module and the script. */
static void test_odd(const algo_case *algo)
{
    static const struct { uint64_t at, cost; bool peek; } calls[] = {
        {ODD_T, 1, false},          {ODD_T, 5, true},
        {ODD_T + 1000, 2, false},   {ODD_T + 60000, 3, false},
        {ODD_T + 120100, 1, false},
    };
    trace t = {.algo = algo};
    call c = {.algo = algo, .max = 5, .window_ms = 60000, .n = 1};

    snprintf(c.reqs[0].key, sizeof(c.reqs[0].key), "odd:%s", algo->name);
    for (int v = 0;; v++) {
        char km[80], kl[80];

        snprintf(km, sizeof(km), "m:%s", c.reqs[0].key);
        snprintf(kl, sizeof(kl), "l:%s", c.reqs[0].key);
        if (!odd_value(algo->name, km, v) || !odd_value(algo->name, kl, v))
            break;
        for (size_t i = 0; i < NELEM(calls); i++) {
            test_context("%s odd value %d, call %zu", algo->name, v, i);
            c.now_ms = calls[i].at;
            c.reqs[0].cost = calls[i].cost;
            c.peek = calls[i].peek;
            if (!step(&t, &c, (long)i))
                break;
        }
    }
    test_context(NULL);
}

/* A counter hash whose w and i match but whose count is not a number: the
   script's arithmetic fails, the module answers an error too, and neither
   writes. */
static void test_counter_bad_count(void)
{
    const algo_case *algo = &cases[0];
    call c = {.algo = algo, .max = 5, .window_ms = 60000,
              .now_ms = 1700000000000ULL, .n = 1, .reqs = {{"badcount", 1}}};
    uint64_t idx = c.now_ms / c.window_ms;
    snap before, after;
    redisReply *r;

    rs_ok(&server, "DEL badcount");
    rs_ok(&server, "HSET badcount w 60000 i %" PRIu64 " c x p 0", idx);
    snap_take(&server, "badcount", &before);
    r = by_module(&server, &c, "");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = by_script(&server, &c, "");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    snap_take(&server, "badcount", &after);
    CHECK(snap_same(&before, &after, true));
    snap_free(&before);
    snap_free(&after);
}

/*
 * The same in the middle of a HITMANY, [fresh, bad count, fresh]: the
 * script stops at the bad key with its error, the first key keeping its
 * count and the third untouched; the module answers one error too (not an
 * array with an error in it), and leaves the keys as the script does.
 */
static void test_hitmany_bad_count(void)
{
    call c = {.algo = &cases[0], .max = 5, .window_ms = 60000,
              .now_ms = 1700000000000ULL, .n = 3,
              .reqs = {{"first", 1}, {"bad", 1}, {"third", 2}}};
    uint64_t idx = c.now_ms / c.window_ms;
    const char *prefixes[2] = {"m:", "l:"};
    redisReply *r;

    for (int i = 0; i < 2; i++) {
        rs_ok(&server, "DEL %sfirst %sbad %sthird", prefixes[i], prefixes[i],
              prefixes[i]);
        rs_ok(&server, "HSET %sbad w 60000 i %" PRIu64 " c x p 0",
              prefixes[i], idx);
    }
    r = by_module(&server, &c, "m:");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = by_script(&server, &c, "l:");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    CHECK(check_twins(&server, "m:first", "l:first"));
    CHECK(check_twins(&server, "m:bad", "l:bad"));
    CHECK(rs_int(&server, "EXISTS m:first") == 1);
    CHECK(rs_int(&server, "EXISTS m:third l:third") == 0);
}

/* ---- Effects: a replica and the AOF -------------------------------------- */

/* Waits until 'replica' follows its master; false after 10 s. */
static bool linked(rs_server *replica)
{
    for (int i = 0; i < 200; i++) {
        redisReply *r = rs_cmd(replica, "INFO replication");
        bool up = r != NULL && r->type == REDIS_REPLY_STRING &&
                  strstr(r->str, "master_link_status:up") != NULL;

        freeReplyObject(r);
        if (up)
            return true;
        rs_sleep_ms(50);
    }
    return false;
}

/* Whether a file under 'dir' holds 'what' (upper case: the files are read
   in upper case); -1 if the directory cannot be read. */
static int dir_holds(const char *dir, const char *what, long *bytes)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;

    *bytes = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[600], *buf;
        FILE *f;
        long n;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if ((f = fopen(path, "rb")) == NULL)
            continue;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        buf = calloc((size_t)n + 1, 1);
        if (fread(buf, 1, (size_t)n, f) == (size_t)n) {
            for (long i = 0; i < n; i++)
                buf[i] = buf[i] == '\0' ? ' '
                                         : (char)toupper((unsigned char)buf[i]);
            found |= strstr(buf, what) != NULL;
            *bytes += n;
        }
        free(buf);
        fclose(f);
    }
    closedir(d);
    return found;
}

/* The keys of the effects test: e:ALGO:0.. the trace's, e:ALGO:N the
   edge's (see effects_edge()). */
#define EFFECT_KEYS (NELEM(cases) * (TRACE_KEYS + 1))

static void effect_key(char *buf, size_t cap, size_t i)
{
    snprintf(buf, cap, "e:%s:%zu", cases[i / (TRACE_KEYS + 1)].name,
             i % (TRACE_KEYS + 1));
}

/* Reads every key of the effects test on 's' into 'out'. */
static void take_all(rs_server *s, snap *out)
{
    for (size_t i = 0; i < EFFECT_KEYS; i++) {
        char key[80];

        effect_key(key, sizeof(key), i);
        snap_take(s, key, &out[i]);
    }
}

/* Checks that 'b' holds what 'a' held, to the ms of each absolute expiry,
   and frees both. */
static void same_all(snap *a, snap *b, const char *what)
{
    for (size_t i = 0; i < EFFECT_KEYS; i++) {
        char key[80];

        effect_key(key, sizeof(key), i);
        test_context("%s: %s", what, key);
        CHECK(snap_same(&a[i], &b[i], true));
        snap_free(&a[i]);
        snap_free(&b[i]);
    }
    test_context(NULL);
}

/* A trace of 'steps' calls through the module on 'master', keys e:...:k. */
static void effects_trace(rs_server *master, const algo_case *algo, int steps)
{
    trace t;
    call c;

    memset(&t, 0, sizeof(t));
    t.algo = algo;
    t.now = 1700000000000ULL;
    for (unsigned k = 0; k < TRACE_KEYS; k++) {
        t.max[k] = pick_max(&t);
        t.window[k] = windows[rng_below(NELEM(windows))];
    }
    for (int i = 0; i < steps; i++) {
        long long f[16];
        redisReply *r;

        next_call(&t, &c);
        r = by_module(master, &c, "e:");
        CHECK(figures(r, c.n, f) == 0);
        freeReplyObject(r);
    }
}

/* Last on its key, a write that only trims: two hits 10 ms apart, then a
   peek when the first has left and the second not (the log's
   ZREMRANGEBYSCORE, the compact log's header). */
static void effects_edge(rs_server *master, const algo_case *algo)
{
    call c = {.algo = algo, .max = 5, .window_ms = 60000, .n = 1};
    uint64_t at[3] = {1700000000000ULL, 1700000000010ULL, 1700000060000ULL};
    long long f[4];

    snprintf(c.reqs[0].key, sizeof(c.reqs[0].key), "%s:%d", algo->name,
             TRACE_KEYS);
    c.reqs[0].cost = 1;
    for (int i = 0; i < 3; i++) {
        redisReply *r;

        c.now_ms = at[i];
        c.peek = i == 2;
        r = by_module(master, &c, "e:");
        CHECK(figures(r, 1, f) == 0 && f[0] == 1);
        freeReplyObject(r);
    }
}

/* A refusal and a peek that trim nothing write nothing: the replication
   offset does not move. */
static void effects_silent(rs_server *master, const algo_case *algo)
{
    call c = {.algo = algo, .max = 1, .window_ms = 60000, .n = 1,
              .now_ms = 1700000000000ULL, .reqs = {{"", 1}}};
    long long before, f[4];
    redisReply *r;

    snprintf(c.reqs[0].key, sizeof(c.reqs[0].key), "silent:%s", algo->name);
    r = by_module(master, &c, "");
    CHECK(figures(r, 1, f) == 0 && f[0] == 1);
    freeReplyObject(r);
    CHECK(rs_int(master, "WAIT 1 5000") == 1);
    before = rs_info_count(master, "replication", "master_repl_offset:");
    for (int i = 0; i < 2; i++) {
        c.peek = i == 1;
        c.now_ms += 1000;
        r = by_module(master, &c, "");
        CHECK(figures(r, 1, f) == 0 && f[0] == 0);
        freeReplyObject(r);
    }
    test_context("%s: refusal and peek", algo->name);
    CHECK_EQ_U64(rs_info_count(master, "replication", "master_repl_offset:"),
                 before);
    test_context(NULL);
}

/*
 * A master with the module and an AOF written at every command, and a
 * replica without the module: after traces of the three algorithms the
 * replica holds the same keys with the same absolute expiries, the AOF no
 * SLUICE command, and the master, killed and restarted from its AOF, the
 * keys and expiries it had.
 */
static void test_effects(void)
{
    const char *mextra[] = {"--appendonly", "yes", "--appendfsync", "always",
                            NULL};
    rs_server master, replica;
    char port[16], dir[600];
    const char *rextra[] = {"--replicaof", "127.0.0.1", port, NULL};
    snap a[EFFECT_KEYS], b[EFFECT_KEYS];
    long bytes;

    if (!CHECK(mf_start(&master, mextra) == 0))
        return;
    snprintf(port, sizeof(port), "%d", master.port);
    if (!CHECK(rs_start(&replica, rextra) == 0)) {
        rs_stop(&master);
        return;
    }
    CHECK(linked(&replica));
    for (size_t i = 0; i < NELEM(cases); i++) {
        effects_trace(&master, &cases[i], 200);
        effects_edge(&master, &cases[i]);
        effects_silent(&master, &cases[i]);
    }
    CHECK(rs_int(&master, "WAIT 1 5000") == 1);
    take_all(&master, a);
    take_all(&replica, b);
    same_all(a, b, "replica");
    CHECK(rs_calls(&replica, "sluice.hit") == 0);
    snprintf(dir, sizeof(dir), "%s/appendonlydir", master.dir);
    CHECK(dir_holds(dir, "SLUICE.", &bytes) == 0);
    CHECK(dir_holds(dir, "PEXPIREAT", &bytes) == 1);
    printf("effects: AOF of %ld bytes, no SLUICE command in it\n", bytes);
    take_all(&master, a);
    rs_kill(&master);
    if (CHECK(rs_restart(&master) == 0)) {
        take_all(&master, b);
        same_all(a, b, "AOF reload");
    }
    rs_stop(&replica);
    rs_stop(&master);
}

/* ---- Main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    printf("seed %" PRIu64 " (test_module_sliding %" PRIu64 " repeats it)\n",
           seed, seed);
    if (mf_start(&server, NULL) < 0)
        return 2;
    for (size_t i = 0; i < NELEM(cases); i++) {
        rng_state = seed + i;
        run_trace(&cases[i], false, false, seed);
        rng_state = seed + 100 + i;
        run_trace(&cases[i], true, false, seed);
        rng_state = seed + 300 + i;
        run_trace(&cases[i], false, true, seed);
        test_foreign(&cases[i]);
        test_odd(&cases[i]);
    }
    test_counter_bad_count();
    test_hitmany_bad_count();
    rng_state = seed + 200;
    test_effects();
    rs_stop(&server);
    return test_summary("test_module_sliding");
}
