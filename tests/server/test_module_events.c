/*
 * test_module_events.c - what sluice.so shows other clients of the server
 * besides its replies and keys, against the scripts, on a real
 * redis-server that loaded the module:
 *
 *   - Keyspace notifications: a second connection subscribes to every
 *     keyspace and keyevent channel (PSUBSCRIBE __keyspace@*__:* and
 *     __keyevent@*__:*). Each step runs one call through an algorithm's
 *     script (EVALSHA) on the s: keys, then the same call through the
 *     module (SLUICE.HIT, or SLUICE.HITMANY for several keys) on their m:
 *     twins, each followed by a PUBLISH on a marker channel, so that the
 *     events one call fired are read up to its marker. The two sequences
 *     must be equal, event for event, in order (the keys' m:/s: prefix
 *     left out), and so must the four figures. For all five algorithms: a
 *     few fixed steps (a count found without a TTL, a trim that empties a
 *     sorted set, the compact log's ring laid out again under a larger
 *     max, a wrapping ring), then a seeded random trace (admits, refusals,
 *     peeks, clock jumps of several windows, limits that change on a key,
 *     HITMANY on distinct keys: a script that names a key twice reads the
 *     PTTL it just set on a clock that may have moved a ms, where the
 *     module's call reads one clock, so a log's "PTTL < window" could
 *     differ by chance), first with notify-keyspace-events KEA,
 *     then once for each class alone (g, $, h, z, n), which fails if an
 *     event is fired in another class than the script's command fires it,
 *     and once with KEAn ("new" in its place among the others). Also
 *     SLUICE.EMQINCR and SLUICE.EMQTTL against emq_incr.lua and
 *     emq_ttl.lua, SLUICE.RESET against DEL, and a key that expired, met
 *     by a call ("expired" fired by the server, active expiry off), and
 *     the fixed window met in the ms its window ends (PTTL 0: the script's
 *     DEL, INCRBY, PEXPIRE), hit by timing the call on the server's clock.
 *   - WATCH: a connection WATCHes a key, one call runs on another
 *     connection, then MULTI/EXEC: EXEC must be aborted exactly when the
 *     script's twin call aborts it. For every algorithm a refusal and a
 *     peek that write nothing (EXEC runs), admits on a new key and on one
 *     with room (aborted), a log's peek whose trim removes units
 *     (aborted); the fixed window's refusal, whose script runs INCRBY and
 *     DECRBY, aborts in both, and so does its peek of a count without a
 *     TTL (PEXPIRE); SLUICE.EMQTTL never aborts; SLUICE.RESET of a missing
 *     key does not, of a key does.
 *
 * Usage: test_module_events [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "module_fixture.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include "algo/algo.h"
#include "algo/model.h" /* which algorithms run on the server's own clock */
#include "queue/queue.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static rs_server server;
/* The algorithms the module decides (test_module_glue()): an algorithm
   without module glue has no module twin to compare, and is skipped. */
static int glue[SLUICE__ALGO_N];
static redisContext *sub; /* the subscriber */

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define EV_MAX 48
#define MARK "sluice-test:mark"

/* ---- The subscriber ------------------------------------------------------ */

/* The events of one call, in order: "space KEY EVENT" (keyspace) and
   "event EVENT KEY" (keyevent), KEY without its m:/s: prefix. */
typedef struct evs {
    int n;
    char e[EV_MAX][128];
} evs;

static int sub_open(void)
{
    struct timeval tv = {10, 0};
    redisReply *r;

    sub = redisConnect("127.0.0.1", server.port);
    if (sub == NULL || sub->err)
        return -1;
    redisSetTimeout(sub, tv);
    redisAppendCommand(sub, "PSUBSCRIBE __keyspace@*__:* __keyevent@*__:*");
    redisAppendCommand(sub, "SUBSCRIBE %s", MARK);
    for (int i = 0; i < 3; i++) {
        if (redisGetReply(sub, (void **)&r) != REDIS_OK)
            return -1;
        freeReplyObject(r);
    }
    return 0;
}

/* A key of the test without its twin's prefix. */
static const char *bare(const char *key)
{
    return (key[0] == 'm' || key[0] == 's') && key[1] == ':' ? key + 2 : key;
}

static void add_event(evs *out, const char *channel, const char *msg)
{
    const char *space = "__keyspace@", *event = "__keyevent@";
    const char *at = strstr(channel, "__:");

    if (out->n >= EV_MAX || at == NULL)
        return;
    if (strncmp(channel, space, strlen(space)) == 0)
        snprintf(out->e[out->n++], sizeof(out->e[0]), "space %s %s",
                 bare(at + 3), msg);
    else if (strncmp(channel, event, strlen(event)) == 0)
        snprintf(out->e[out->n++], sizeof(out->e[0]), "event %s %s", at + 3,
                 bare(msg));
}

/* The events since the last mark: publishes a new mark and reads up to it.
   Returns false when the subscriber failed. */
static bool collect(evs *out)
{
    static long marks;
    char mark[24];
    redisReply *r;

    out->n = 0;
    snprintf(mark, sizeof(mark), "%ld", ++marks);
    rs_ok(&server, "PUBLISH %s %s", MARK, mark);
    for (;;) {
        bool done = false;

        if (!CHECK(redisGetReply(sub, (void **)&r) == REDIS_OK))
            return false;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            strcmp(r->element[0]->str, "message") == 0)
            done = strcmp(r->element[2]->str, mark) == 0;
        else if (r->type == REDIS_REPLY_ARRAY && r->elements == 4)
            add_event(out, r->element[2]->str, r->element[3]->str);
        freeReplyObject(r);
        if (done)
            return true;
    }
}

static void print_evs(const char *who, const evs *v)
{
    fprintf(stderr, "  %s:", who);
    for (int i = 0; i < v->n; i++)
        fprintf(stderr, " [%s]", v->e[i]);
    fprintf(stderr, "%s\n", v->n == 0 ? " none" : "");
}

/* The names of the events the scripts fired (",a,b,"), to check that the
   steps reached them all: one slot per algorithm, then the queue's and
   RESET's commands, then the calls that met an expired key. */
static char seen[TEST_ALGO_N + 2][512];

static void note_seen(int slot, const evs *v)
{
    for (int i = 0; i < v->n; i++) {
        const char *name = strrchr(v->e[i], ' ') + 1;
        char word[64];

        if (strncmp(v->e[i], "space ", 6) != 0)
            continue;
        if (seen[slot][0] == '\0')
            strcpy(seen[slot], ",");
        snprintf(word, sizeof(word), ",%s,", name);
        if (strstr(seen[slot], word) == NULL &&
            strlen(seen[slot]) + strlen(word) < sizeof(seen[0]))
            strcat(strcat(seen[slot], name), ",");
    }
}

/* Whether the script's events 'l' and the module's 'm' are the same. */
static bool same_events(const evs *l, const evs *m)
{
    bool same = l->n == m->n;

    for (int i = 0; same && i < l->n; i++)
        same = strcmp(l->e[i], m->e[i]) == 0;
    if (!same) {
        print_evs("script", l);
        print_evs("module", m);
    }
    return CHECK(same);
}

/* ---- Twin calls ---------------------------------------------------------- */

/* One call: a request on 1 to 3 keys (named without the m:/s: prefix). */
typedef struct call {
    mf_request rq;
    int n;
    char keys[3][64];
    uint64_t costs[3];
} call;

/* Drains what a setup fired (it is the test's own, not compared). */
static void drain(void)
{
    evs junk;

    collect(&junk);
}

/* Figure 'i' of a call: equal, but for the waits of an algorithm on the
   server's own clock (the fixed window's: its model says), read from twin
   keys made a moment apart. */
static bool same_figure(const call *c, int i, long long a, long long b)
{
    if (sluice__models[c->rq.algo]->server_clock && i % 4 >= 2)
        return CHECK(llabs(a - b) <= 1000);
    return CHECK_EQ_U64(a, b) != 0;
}

/*
 * 'c' through the script on the s: keys, then through the module on the
 * m: keys: the figures and the events must be the same. 'slot' records
 * the script's events seen. Returns false on a difference.
 */
static bool twin_step(const call *c, int slot)
{
    static long tokens;
    char sk[3][72], mk[3][72], msg[200], token[32];
    const char *sp[3], *mp[3];
    long long a[12], b[12];
    mf_answer ans;
    evs l, m;
    int rl, rm;
    bool ok = true;

    for (int i = 0; i < c->n; i++) {
        snprintf(sk[i], sizeof(sk[i]), "s:%s", c->keys[i]);
        snprintf(mk[i], sizeof(mk[i]), "m:%s", c->keys[i]);
        sp[i] = sk[i];
        mp[i] = mk[i];
    }
    /* A ms at least since each key's last call, on both twins: a PTTL read
       against a window (the logs' "PTTL < window") reads alike on both. */
    rs_sleep_ms(1);
    snprintf(token, sizeof(token), "lua%ld", ++tokens);
    rl = mf_script_hitmany(&server, sp, c->costs, c->n, &c->rq, token, a,
                           msg, sizeof(msg));
    if (!collect(&l))
        return false;
    if (c->n == 1) {
        rm = mf_module_hit(&server, mp[0], &c->rq, &ans) == 0 &&
                     !ans.error && !ans.foreign ? 0 : -1;
        memcpy(b, ans.fig, sizeof(ans.fig));
    } else {
        rm = mf_module_hitmany(&server, mp, c->costs, c->n, &c->rq, b, msg,
                               sizeof(msg));
    }
    if (!collect(&m))
        return false;
    note_seen(slot, &l);
    ok = CHECK(rl == 0) && CHECK(rm == 0);
    for (int i = 0; ok && i < 4 * c->n; i++)
        ok = same_figure(c, i, a[i], b[i]);
    return same_events(&l, &m) && ok;
}

/* Runs 'fmt' (one %s: the key) on both twins of 'key', then drains. */
static void setup_twins(const char *fmt, const char *key)
{
    char k[80];

    snprintf(k, sizeof(k), "s:%s", key);
    CHECK(rs_ok(&server, fmt, k) == 0);
    snprintf(k, sizeof(k), "m:%s", key);
    CHECK(rs_ok(&server, fmt, k) == 0);
    drain();
}

/* ---- Fixed steps --------------------------------------------------------- */

#define T0 1700000000000LL
#define W 60000LL

/* One step of a scenario: a call on one key at T0 + 'at'. */
typedef struct scene {
    sluice_algo algo;
    const char *key;
    uint64_t max, cost;
    long long at;
    bool peek;
    const char *setup; /* run on both twins first (%s: the key), or NULL */
} scene;

static const scene scenes[] = {
    /* fixed: admits, a refusal (INCRBY then DECRBY), a peek; counts found
       without a TTL (a hit, a refusal, a peek give them one), and "0". */
    {SLUICE_FIXED, "f1", 2, 1, 0, false, NULL},
    {SLUICE_FIXED, "f1", 2, 1, 0, false, NULL},
    {SLUICE_FIXED, "f1", 2, 1, 0, false, NULL},
    {SLUICE_FIXED, "f1", 2, 1, 0, true, NULL},
    {SLUICE_FIXED, "f2", 2, 1, 0, false, "SET %s 1"},
    {SLUICE_FIXED, "f3", 2, 1, 0, false, "SET %s 5"},
    {SLUICE_FIXED, "f4", 2, 1, 0, true, "SET %s 1"},
    {SLUICE_FIXED, "f5", 2, 2, 0, false, "SET %s 0"},
    /* sliding-counter: admits, a refusal, a peek, the next windows. */
    {SLUICE_SLIDING_COUNTER, "c1", 2, 1, 0, false, NULL},
    {SLUICE_SLIDING_COUNTER, "c1", 2, 1, 5, false, NULL},
    {SLUICE_SLIDING_COUNTER, "c1", 2, 1, 6, false, NULL},
    {SLUICE_SLIDING_COUNTER, "c1", 2, 1, 7, true, NULL},
    {SLUICE_SLIDING_COUNTER, "c1", 2, 1, W + 7, false, NULL},
    {SLUICE_SLIDING_COUNTER, "c1", 2, 2, 3 * W, false, NULL},
    /* sliding-log: a refusal and a peek that trim nothing; a peek whose
       trim empties the set (ZREMRANGEBYSCORE, DEL); a hit whose trim
       empties it; two ZADD batches. */
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 0, false, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 1, false, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 2, false, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 2, true, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 3 * W, true, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 2, 3 * W, false, NULL},
    {SLUICE_SLIDING_LOG, "l1", 2, 1, 6 * W, false, NULL},
    {SLUICE_SLIDING_LOG, "l2", 1000, 600, 0, false, NULL},
    /* gcra: admits, a refusal, a peek. */
    {SLUICE_GCRA, "g1", 2, 1, 0, false, NULL},
    {SLUICE_GCRA, "g1", 2, 1, 0, false, NULL},
    {SLUICE_GCRA, "g1", 2, 1, 0, false, NULL},
    {SLUICE_GCRA, "g1", 2, 1, 0, true, NULL},
    /* compact-log: a full ring laid out again under a larger max (SET
       KEEPTTL); all units gone (DEL) on a peek, then on a hit; a ring
       that wraps (three SETRANGEs); a trim on a peek and on a refusal
       (the header's SETRANGE). */
    {SLUICE_COMPACT_LOG, "k1", 2, 1, 0, false, NULL},
    {SLUICE_COMPACT_LOG, "k1", 2, 1, 0, false, NULL},
    {SLUICE_COMPACT_LOG, "k1", 5, 1, 0, false, NULL},
    {SLUICE_COMPACT_LOG, "k1", 5, 1, 3 * W, true, NULL},
    {SLUICE_COMPACT_LOG, "k1", 5, 1, 3 * W, false, NULL},
    {SLUICE_COMPACT_LOG, "k1", 5, 1, 6 * W, false, NULL},
    {SLUICE_COMPACT_LOG, "k2", 3, 1, 0, false, NULL},
    {SLUICE_COMPACT_LOG, "k2", 3, 1, 10, false, NULL},
    {SLUICE_COMPACT_LOG, "k2", 3, 2, W, false, NULL},
    {SLUICE_COMPACT_LOG, "k3", 3, 1, 0, false, NULL},
    {SLUICE_COMPACT_LOG, "k3", 3, 1, 10, false, NULL},
    {SLUICE_COMPACT_LOG, "k3", 3, 1, W + 5, true, NULL},
    {SLUICE_COMPACT_LOG, "k3", 3, 3, W + 20, false, NULL},
    {SLUICE_COMPACT_LOG, "k3", 3, 3, W + 20, false, NULL},
};

static void test_scenes(void)
{
    for (size_t i = 0; i < NELEM(scenes); i++) {
        const scene *sc = &scenes[i];
        call c = {.rq = {.algo = sc->algo, .max = sc->max, .window_ms = W,
                         .cost = sc->cost, .peek = sc->peek,
                         .now_ms = T0 + sc->at},
                  .n = 1, .costs = {sc->cost}};

        snprintf(c.keys[0], sizeof(c.keys[0]), "scene:%s:%s",
                 sluice_algo_name(sc->algo), sc->key);
        test_context("scene %zu: %s key %s max %" PRIu64 " cost %" PRIu64
                     " at T0+%lld%s%s", i, sluice_algo_name(sc->algo),
                     sc->key, sc->max, sc->cost, sc->at,
                     sc->peek ? " peek" : "", sc->setup ? " (setup)" : "");
        if (sc->setup != NULL)
            setup_twins(sc->setup, c.keys[0]);
        twin_step(&c, (int)sc->algo);
    }
    test_context(NULL);
}

/*
 * A key that expired, met by a call: the server fires "expired" as the
 * call reads it, then the call's own events. Active expiry is off, so the
 * key is found by the call, not by the server's cycle between two steps.
 */
static void test_expired(void)
{
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++) {
        call c = {.rq = {.algo = (sluice_algo)a, .max = 1, .window_ms = 20,
                         .cost = 1, .now_ms = T0},
                  .n = 1, .costs = {1}};

        if (!glue[a])
            continue;
        test_context("expired: %s", sluice_algo_name((sluice_algo)a));
        snprintf(c.keys[0], sizeof(c.keys[0]), "expired:%s",
                 sluice_algo_name((sluice_algo)a));
        twin_step(&c, (int)a);
        rs_sleep_ms(60);
        c.rq.now_ms += 1000;
        twin_step(&c, TEST_ALGO_N + 1);
        CHECK(strstr(seen[TEST_ALGO_N + 1], ",expired,") != NULL);
    }
    test_context(NULL);
}

/* The server's clock in ms (TIME). */
static long long server_ms(void)
{
    redisReply *r = rs_cmd(&server, "TIME");
    long long ms = -1;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* The events of 'v' as one line, into 'out'. */
static void joined(const evs *v, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < v->n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "[%s]", v->e[i]);
}

/*
 * One fixed-window hit on 'key' (max 5, window 60 s) timed for the very ms
 * its count of 1 ends its window: the count is given an expiry a few ms
 * ahead, and the hit is sent once the server's clock reads that ms. Its
 * events into 'out'; answers whether it met the window's end (PTTL 0: the
 * count started anew, remaining 4, where the key had not expired yet: no
 * "expired"). The moment may be missed either way: a plain hit (remaining
 * 3), or a key expired first.
 */
static bool restart_attempt(const char *key, bool module, evs *out)
{
    char mkey[80], now[24], line[512];
    long long at;
    mf_answer ans;
    mf_request rq = {.algo = SLUICE_FIXED, .max = 5, .window_ms = 60000,
                     .cost = 1, .now_ms = -1};

    snprintf(mkey, sizeof(mkey), "%s:%s", module ? "m" : "s", key);
    rs_ok(&server, "SET %s 1", mkey);
    at = server_ms() + 4;
    rs_ok(&server, "PEXPIREAT %s %lld", mkey, at);
    drain();
    memset(&ans, 0, sizeof(ans));
    while (server_ms() < at)
        ;
    snprintf(now, sizeof(now), "%lld", at);
    if (module)
        mf_module_hit(&server, mkey, &rq, &ans);
    else
        mf_script_hit(&server, mkey, &rq, now, &ans);
    collect(out);
    joined(out, line, sizeof(line));
    return ans.fig[1] == 4 && strstr(line, " expired]") == NULL;
}

/*
 * The fixed window restarted at PTTL 0: the module's events, each time its
 * hit met the moment, are the script's, each time its hit met it (both
 * must, at least once).
 */
static void test_fixed_restart(void)
{
    char want[512] = "", first[512] = "", line[512];
    int met[2] = {0, 0};
    evs v;

    test_context("fixed: a hit at PTTL 0");
    /* With "new" too: the script's second INCRBY makes the key anew. */
    CHECK(rs_ok(&server, "CONFIG SET notify-keyspace-events KEAn") == 0);
    for (int i = 0; i < 400 && (met[0] < 5 || met[1] < 5); i++) {
        int side = i & 1;

        if (!restart_attempt("restart:fixed", side == 1, &v))
            continue;
        met[side]++;
        joined(&v, line, sizeof(line));
        if (want[0] == '\0' && side == 0) {
            snprintf(want, sizeof(want), "%s", line);
            printf("fixed at PTTL 0, the script fired: %s\n", want);
        }
        if (side == 1 && first[0] == '\0')
            snprintf(first, sizeof(first), "%s", line);
        if (side == 1 && want[0] != '\0' && strcmp(line, want) != 0)
            fprintf(stderr, "  script: %s\n  module: %s\n", want, line);
        CHECK(side == 0 || want[0] == '\0' || strcmp(line, want) == 0);
    }
    CHECK(met[0] > 0 && met[1] > 0 && strcmp(first, want) == 0);
    CHECK(strstr(want, " new]") != NULL);
    CHECK(rs_ok(&server, "CONFIG SET notify-keyspace-events KEA") == 0);
    test_context(NULL);
}

/* ---- Random traces ------------------------------------------------------- */

enum { TRACE_KEYS = 4 };

static const uint64_t maxes[] = {1, 2, 3, 5, 10};
/* Windows far apart: the server's clock moves a few seconds in a run, so
   a log's "PTTL < window" reads alike on both twins. */
static const uint64_t windows[] = {30000, 60000, 120000};

/* The next clock: the same ms, a few ms on, part of a window, a window,
   the next window's start (a ms either side), a step back, several
   windows on (a trim that empties a log, a key whose state is over). */
static uint64_t next_now(uint64_t now, uint64_t w)
{
    uint64_t r = rng_below(100);

    if (r < 30)
        return now;
    if (r < 50)
        return now + rng_range(1, 5);
    if (r < 65)
        return now + rng_range(1, w - 1);
    if (r < 75)
        return now + w;
    if (r < 85)
        return (now / w + 1) * w + rng_range(0, 2) - 1;
    if (r < 90)
        return now - rng_range(1, w / 2);
    return now + rng_range(2 * w, 4 * w);
}

/* The next call of a trace on 'algo': one key, or two or three distinct
   ones (HITMANY), under the first key's limit. */
static void next_call(sluice_algo algo, const char *round, uint64_t *now,
                      uint64_t *max, uint64_t *win, call *c)
{
    unsigned k = (unsigned)rng_below(TRACE_KEYS);

    if (rng_pct(5)) { /* this key's limit changes */
        max[k] = maxes[rng_below(NELEM(maxes))];
        win[k] = windows[rng_below(NELEM(windows))];
    }
    memset(c, 0, sizeof(*c));
    c->rq.algo = algo;
    c->rq.max = max[k];
    c->rq.window_ms = win[k];
    c->rq.peek = rng_pct(15);
    if (algo == SLUICE_GCRA && rng_pct(30))
        c->rq.burst = rng_range(1, max[k]);
    *now = next_now(*now, win[k]);
    c->rq.now_ms = (long long)*now;
    c->n = rng_pct(75) ? 1 : (int)rng_range(2, 3);
    for (int i = 0; i < c->n; i++) {
        uint64_t top = c->rq.burst != 0 ? c->rq.burst : c->rq.max;

        snprintf(c->keys[i], sizeof(c->keys[i]), "%s:%s:%u", round,
                 sluice_algo_name(algo), (k + (unsigned)i) % TRACE_KEYS);
        c->costs[i] = rng_pct(70) ? 1 : rng_range(1, top);
    }
    c->rq.cost = c->costs[0];
}

/* 'steps' random calls on fresh keys named after 'round'. */
static void run_trace(sluice_algo algo, const char *round, long steps,
                      uint64_t seed)
{
    uint64_t now = (uint64_t)T0 + rng_below(1000000), max[TRACE_KEYS],
             win[TRACE_KEYS];
    long bad = 0;
    call c;

    for (unsigned k = 0; k < TRACE_KEYS; k++) {
        max[k] = maxes[rng_below(NELEM(maxes))];
        win[k] = windows[rng_below(NELEM(windows))];
    }
    for (long i = 0; i < steps && bad < 5; i++) {
        next_call(algo, round, &now, max, win, &c);
        test_context("%s trace %s seed %" PRIu64 " step %ld: %d key(s), "
                     "first %s, max %" PRIu64 " window %" PRIu64 " now %"
                     PRIu64 " cost %" PRIu64 "%s", sluice_algo_name(algo),
                     round, seed, i, c.n, c.keys[0], c.rq.max,
                     c.rq.window_ms, now, c.costs[0],
                     c.rq.peek ? " peek" : "");
        if (!twin_step(&c, (int)algo))
            bad++;
    }
    test_context(NULL);
}

/* The events each algorithm's script fired over the steps and traces,
   every one of which the module matched. The events listed by hand are
   checked where an algorithm has them (a new one's go beside them). */
static void check_seen(void)
{
    static const char *const want[SLUICE__ALGO_N] = {
        [SLUICE_FIXED] = "incrby expire",
        [SLUICE_SLIDING_COUNTER] = "hset expire",
        [SLUICE_SLIDING_LOG] = "zremrangebyscore del zadd expire",
        [SLUICE_GCRA] = "set expire",
        [SLUICE_COMPACT_LOG] = "del set setrange expire",
    };

    for (unsigned a = 0; a < SLUICE__ALGO_N; a++) {
        char list[128], *save = NULL;

        printf("%s: the script fired %s\n", sluice_algo_name((sluice_algo)a),
               seen[a]);
        if (want[a] == NULL || !glue[a])
            continue;
        snprintf(list, sizeof(list), "%s", want[a]);
        for (char *w = strtok_r(list, " ", &save); w != NULL;
             w = strtok_r(NULL, " ", &save)) {
            char word[64];

            snprintf(word, sizeof(word), ",%s,", w);
            test_context("%s fired %s", sluice_algo_name((sluice_algo)a), w);
            CHECK(strstr(seen[a], word) != NULL);
        }
    }
    test_context(NULL);
}

/* Whether any algorithm's script fired an event since 'seen' was reset. */
static bool any_seen(void)
{
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++)
        if (seen[a][0] != '\0')
            return true;
    return false;
}

/*
 * The traces again, under each class of events alone: an event fired in
 * another class than the script's command fires it is seen on one side
 * only. Each class must show some events.
 */
static void test_classes(uint64_t seed)
{
    static const char *const classes[] = {"KEg", "KE$", "KEh", "KEz", "KEn",
                                          "KEAn"};

    for (size_t i = 0; i < NELEM(classes); i++) {
        char round[16];

        CHECK(rs_ok(&server, "CONFIG SET notify-keyspace-events %s",
                    classes[i]) == 0);
        memset(seen, 0, sizeof(seen));
        for (unsigned a = 0; a < SLUICE__ALGO_N; a++) {
            if (!glue[a])
                continue;
            snprintf(round, sizeof(round), "class%zu", i);
            rng_state = seed + 10 * (i + 1) + a;
            run_trace((sluice_algo)a, round, 80, seed);
        }
        test_context("class %s", classes[i]);
        CHECK(any_seen());
    }
    test_context(NULL);
    CHECK(rs_ok(&server, "CONFIG SET notify-keyspace-events KEA") == 0);
}

/* ---- Queue limiter and RESET --------------------------------------------- */

/*
 * Runs 'script' then 'module' (argument lists; "$s"/"$m" stand for the
 * key named 'a', "$S"/"$M" for 'b', each with its twin's prefix): the
 * events must be the same, and so must the replies' types.
 */
static void twin_commands(const char *const *script,
                          const char *const *module, const char *a,
                          const char *b)
{
    char keys[4][80];
    const char *argv[2][16];
    redisReply *r[2];
    evs ev[2];

    snprintf(keys[0], 80, "s:%s", a);
    snprintf(keys[1], 80, "m:%s", a);
    snprintf(keys[2], 80, "s:%s", b ? b : "");
    snprintf(keys[3], 80, "m:%s", b ? b : "");
    for (int side = 0; side < 2; side++) {
        const char *const *in = side == 0 ? script : module;
        int n = 0;

        for (; in[n] != NULL && n < 15; n++)
            argv[side][n] = strcmp(in[n], "$s") == 0   ? keys[0]
                            : strcmp(in[n], "$m") == 0 ? keys[1]
                            : strcmp(in[n], "$S") == 0 ? keys[2]
                            : strcmp(in[n], "$M") == 0 ? keys[3]
                                                       : in[n];
        r[side] = rs_cmdargv(&server, n, argv[side], NULL);
        collect(&ev[side]);
    }
    CHECK(r[0] != NULL && r[1] != NULL && r[0]->type == r[1]->type);
    same_events(&ev[0], &ev[1]);
    note_seen(TEST_ALGO_N, &ev[0]);
    freeReplyObject(r[0]);
    freeReplyObject(r[1]);
}

/* SLUICE.EMQINCR against emq_incr.lua, from every state of the limiter
   that changes what it fires; SLUICE.EMQTTL against emq_ttl.lua (none). */
static void test_emq(void)
{
    const char *incr[] = {"EVALSHA", sluice__script_emq_incr.sha1, "1",
                          "$s", "7000", NULL};
    const char *mincr[] = {"SLUICE.EMQINCR", "$m", "7000", NULL};
    const char *ttl[] = {"EVALSHA", sluice__script_emq_ttl.sha1, "2", "$s",
                         "$S", "2", NULL};
    const char *mttl[] = {"SLUICE.EMQTTL", "$m", "$M", "2", NULL};
    static const char *const setups[] = {
        NULL, "SET %s 5", "SET %s 0", "SET %s x", "RPUSH %s a",
        "SET %s 9223372036854775807",
    };

    CHECK(rs_ok(&server, "SCRIPT LOAD %s", sluice__script_emq_incr.text) ==
              0 &&
          rs_ok(&server, "SCRIPT LOAD %s", sluice__script_emq_ttl.text) == 0);
    for (size_t i = 0; i < NELEM(setups); i++) {
        test_context("emq: limiter %s", setups[i] ? setups[i] : "absent");
        rs_ok(&server, "DEL s:emq:lim m:emq:lim");
        drain();
        if (setups[i] != NULL)
            setup_twins(setups[i], "emq:lim");
        twin_commands(incr, mincr, "emq:lim", NULL);
        twin_commands(incr, mincr, "emq:lim", NULL);
        twin_commands(ttl, mttl, "emq:lim", "emq:meta");
    }
    test_context(NULL);
    CHECK(strstr(seen[TEST_ALGO_N], ",incrby,") != NULL &&
          strstr(seen[TEST_ALGO_N], ",expire,") != NULL);
}

/* SLUICE.RESET against DEL: "del" for each key deleted, in order. */
static void test_reset(void)
{
    const char *del[] = {"DEL", "$s", "$S", NULL};
    const char *reset[] = {"SLUICE.RESET", "$m", "$M", NULL};

    test_context("reset");
    setup_twins("SET %s 1", "reset:a");
    setup_twins("HSET %s w 1", "reset:b");
    twin_commands(del, reset, "reset:a", "reset:b");
    twin_commands(del, reset, "reset:a", "reset:b"); /* gone: none */
    setup_twins("SET %s 1", "reset:b");
    twin_commands(del, reset, "reset:a", "reset:b");
    test_context(NULL);
    CHECK(strstr(seen[TEST_ALGO_N], ",del,") != NULL);
}

/* ---- WATCH --------------------------------------------------------------- */

static redisContext *watcher;

enum { EXEC_RAN = 1, EXEC_ABORTED = 0 };
/* For watch_both(): no outcome written by hand, only the twins' agreement
   (an algorithm the watch steps below do not name). */
enum { WATCH_UNPINNED = -2 };

/* WATCH 'key' on the watcher, 'op' on the helper's connection, then
   MULTI, PING, EXEC on the watcher: EXEC_RAN, EXEC_ABORTED, or -1. */
static int watched(const char *key, const char *const *op)
{
    redisReply *r;
    int n = 0, rc;

    while (op[n] != NULL)
        n++;
    r = redisCommand(watcher, "WATCH %s", key);
    freeReplyObject(r);
    freeReplyObject(rs_cmdargv(&server, n, (const char **)op, NULL));
    freeReplyObject(redisCommand(watcher, "MULTI"));
    freeReplyObject(redisCommand(watcher, "PING"));
    r = redisCommand(watcher, "EXEC");
    rc = r == NULL                        ? -1
         : r->type == REDIS_REPLY_NIL     ? EXEC_ABORTED
         : r->type == REDIS_REPLY_ARRAY   ? EXEC_RAN
                                          : -1;
    freeReplyObject(r);
    drain();
    return rc;
}

/* 'what' on the script's key and on the module's: the same outcome, the
   one expected. */
static void watch_both(const char *key, const char *const *script,
                       const char *const *module, int want)
{
    char sk[80], mk[80];
    int l, m;

    snprintf(sk, sizeof(sk), "s:%s", key);
    snprintf(mk, sizeof(mk), "m:%s", key);
    l = watched(sk, script);
    m = watched(mk, module);
    CHECK(want == WATCH_UNPINNED ? l >= 0 : l == want);
    CHECK(m == l);
}

/* A request's arguments, module or script, on 'key' at T0 + 'at' ('bufs':
   72 bytes for the numbers and the script's token, unique). */
static void request_argv(const char **argv, char *bufs, sluice_algo a,
                         const char *key, uint64_t max, long long at,
                         bool peek, bool module)
{
    static long tokens;
    char *mx = bufs, *now = bufs + 24, *token = bufs + 48;

    snprintf(mx, 24, "%" PRIu64, max);
    snprintf(now, 24, "%lld", T0 + at);
    snprintf(token, 24, "w%ld", ++tokens);
    if (module) {
        const char *v[] = {"SLUICE.HIT", key, sluice_algo_name(a), mx, "60000",
                           "NOW", now, peek ? "PEEK" : NULL, NULL};

        memcpy(argv, v, sizeof(v));
        return;
    }
    const char *v[] = {"EVALSHA", sluice__algo_scripts[a]->sha1, "1", key,
                       mx, "60000", peek ? "0" : "1", now, token, "1", NULL};

    memcpy(argv, v, sizeof(v));
}

/* One call under WATCH: on key 'key' (a suffix), max, at T0 + 'at'; EXEC's
   outcome for the fixed window, for the logs, for the others (the sliding
   counter and gcra: an algorithm none of these names is checked only for
   the module's outcome being the script's). */
typedef struct watch_step {
    const char *what, *key, *setup;
    uint64_t max;
    long long at;
    bool peek;
    int fixed, logs, others;
} watch_step;

#define RAN EXEC_RAN
#define ABORTED EXEC_ABORTED

static const watch_step watch_steps[] = {
    {"first hit", "a", NULL, 1, 0, false, ABORTED, ABORTED, ABORTED},
    /* The fixed window's script refuses with INCRBY and DECRBY. */
    {"refusal", "a", NULL, 1, 0, false, ABORTED, RAN, RAN},
    {"peek", "a", NULL, 1, 0, true, RAN, RAN, RAN},
    {"admit", "b", NULL, 5, 0, false, ABORTED, ABORTED, ABORTED},
    {"admit again", "b", NULL, 5, 0, false, ABORTED, ABORTED, ABORTED},
    /* Two windows on, a log's peek trims all it holds. */
    {"peek, windows on", "b", NULL, 5, 2 * W, true, RAN, ABORTED, RAN},
    /* The fixed window's peek gives a count without a TTL one. */
    {"peek, no TTL", "c", "SET %s 1", 5, 0, true, ABORTED, RAN, RAN},
};

/* For each algorithm, the steps above under WATCH. */
static void test_watch_algos(void)
{
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++) {
        const char *name = sluice_algo_name((sluice_algo)a);
        bool log = a == SLUICE_SLIDING_LOG || a == SLUICE_COMPACT_LOG;
        bool other = a == SLUICE_SLIDING_COUNTER || a == SLUICE_GCRA;

        if (!glue[a])
            continue;
        for (size_t i = 0; i < NELEM(watch_steps); i++) {
            const watch_step *ws = &watch_steps[i];
            const char *sv[12], *mv[12];
            char key[64], sk[80], mk[80], sb[72], mb[72];

            if (ws->setup != NULL && a != SLUICE_FIXED)
                continue;
            snprintf(key, sizeof(key), "watch:%s:%s", name, ws->key);
            snprintf(sk, sizeof(sk), "s:%s", key);
            snprintf(mk, sizeof(mk), "m:%s", key);
            if (ws->setup != NULL)
                setup_twins(ws->setup, key);
            request_argv(sv, sb, (sluice_algo)a, sk, ws->max, ws->at,
                         ws->peek, false);
            request_argv(mv, mb, (sluice_algo)a, mk, ws->max, ws->at,
                         ws->peek, true);
            test_context("watch %s: %s", name, ws->what);
            watch_both(key, sv, mv, a == SLUICE_FIXED ? ws->fixed
                                    : log             ? ws->logs
                                    : other           ? ws->others
                                                      : WATCH_UNPINNED);
        }
    }
    test_context(NULL);
}

/* The queue's limiter and RESET under WATCH. */
static void test_watch_others(void)
{
    const char *ttl[] = {"EVALSHA", sluice__script_emq_ttl.sha1, "2",
                         "s:wq:lim", "s:wq:meta", "2", NULL};
    const char *mttl[] = {"SLUICE.EMQTTL", "m:wq:lim", "m:wq:meta", "2",
                          NULL};
    const char *incr[] = {"EVALSHA", sluice__script_emq_incr.sha1, "1",
                          "s:wq:lim", "7000", NULL};
    const char *mincr[] = {"SLUICE.EMQINCR", "m:wq:lim", "7000", NULL};
    const char *del[] = {"DEL", "s:wq:gone", NULL};
    const char *reset[] = {"SLUICE.RESET", "m:wq:gone", NULL};
    const char *del2[] = {"DEL", "s:wq:lim", NULL};
    const char *reset2[] = {"SLUICE.RESET", "m:wq:lim", NULL};

    test_context("watch: EMQINCR");
    watch_both("wq:lim", incr, mincr, EXEC_ABORTED);
    test_context("watch: EMQTTL");
    watch_both("wq:lim", ttl, mttl, EXEC_RAN);
    test_context("watch: RESET of a missing key");
    watch_both("wq:gone", del, reset, EXEC_RAN);
    test_context("watch: RESET of a key");
    watch_both("wq:lim", del2, reset2, EXEC_ABORTED);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    static const char *const extra[] = {"--enable-debug-command", "local",
                                        NULL};
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    printf("seed %" PRIu64 " (test_module_events %" PRIu64 " repeats it)\n",
           seed, seed);
    if (mf_start(&server, extra) < 0)
        return 2;
    if (!CHECK(rs_ok(&server, "CONFIG SET notify-keyspace-events KEA") == 0) ||
        !CHECK(rs_ok(&server, "DEBUG SET-ACTIVE-EXPIRE 0") == 0) ||
        !CHECK(sub_open() == 0) ||
        !CHECK((watcher = redisConnect("127.0.0.1", server.port)) != NULL &&
               !watcher->err))
        return test_summary("test_module_events");
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++)
        glue[a] = test_module_glue(&server, (sluice_algo)a);
    test_scenes();
    test_expired();
    test_fixed_restart();
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++) {
        if (!glue[a])
            continue;
        rng_state = seed + a;
        run_trace((sluice_algo)a, "kea", 300, seed);
    }
    check_seen();
    test_emq();
    test_reset();
    test_classes(seed);
    test_watch_algos();
    test_watch_others();
    redisFree(sub);
    redisFree(watcher);
    rs_stop(&server);
    return test_summary("test_module_events");
}
