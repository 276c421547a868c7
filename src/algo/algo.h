/*
 * algo.h - an algorithm, as a table of pure functions and a table of what
 * only a store on a server needs of it, and the tables of every algorithm.
 *
 * An algorithm lives in one folder, src/algo/NAME/:
 *
 *   NAME.c    its two tables (below): 'const sluice__algo sluice__algo_NAME',
 *             pure functions of (state, limit, now, cost), no I/O, no clock
 *             (the decision itself may be in NAME.h, which its module.c,
 *             the server module's glue, shares: src/module/glue.h); and
 *             'const sluice__algo_server sluice__algo_server_NAME', its
 *             server part
 *   NAME.lua  the same decision as a server script, between the shared
 *             src/algo/prelude.lua and src/algo/epilogue.lua (which give every
 *             algorithm's script the same ARGV and reply), built into
 *             'sluice__script_NAME'
 *   model.c   a plain reference model of it, for the tests
 *   demo.txt  what 'sluice demo' says of it (cli/demo.c)
 *
 * (optional: module.c, its glue in sluice.so, and fn_check.lua, its bounds
 * for the Functions library) and one line in SLUICE_ALGO_MAP
 * (include/sluice.h), from which the enum, the tables below, the build
 * (CMakeLists.txt) and the tests derive. CONTRIBUTING.md's "Adding an algorithm"
 * is the recipe, and CI follows it (scripts/sixth_algo.sh).
 *
 * The parts are linked apart: the embedded store uses only the pure table
 * (algo.c's sluice__algos), the server module also the server parts
 * (server.c's sluice__algo_servers) but no script, and only the client's
 * server stores run the scripts (scripts.c's sluice__algo_scripts).
 */
#ifndef SLUICE_ALGO_H
#define SLUICE_ALGO_H

#include "core/core.h"

/* How many algorithms there are (SLUICE_ALGO_MAP), as a constant. */
#define SLUICE__ALGO_PLUS_ONE(name, val, folder) +1
enum { SLUICE__ALGO_N = 0 SLUICE_ALGO_MAP(SLUICE__ALGO_PLUS_ONE) };

/*
 * The lock-free form of a state (optional): the whole state in one 64-bit
 * word, relative to a 'base_ms' that the store fixes per key (the time it
 * created the key, moved up when a state no longer fits; every 'now_ms' it
 * passes is >= 'base_ms'). The embedded
 * store decides on the word with a compare-and-swap and no lock, and falls
 * back to the locked path on the struct state when the word cannot hold
 * the limit, the time or the result. A word never has SLUICE__WORD_STORE_BIT
 * set: that bit is the store's (the word is held under its lock).
 *
 * load()     word -> state: the state that 'word' stands for.
 * store()    state -> word: false when the state is out of the word's range.
 * decide()   the pure decision on a word, the same as load(), decide() on the
 *            state, store() -- the tests check it on random inputs: answers
 *            into 'out', sets '*next' to the word after it (equal to 'word'
 *            when nothing changes: the store then writes nothing), and
 *            returns 0, or SLUICE__WORD_RANGE when the limit, the time or
 *            the new state is beyond the word ('out' is then undefined).
 *            It may be NULL: the store then runs load(), decide(), store().
 *
 * An algorithm with a word must keep no memory outside 'state_size', answer
 * idle_at() without its limit (it is passed NULL; the store asks it of a
 * loaded word when sweeping), and its idle_at() must never decrease from one
 * decision to the next, so that the time a store noted stays a lower bound.
 * The fixed window has all three; gcra has load() and store() of its
 * theoretical arrival time, and the generic decide.
 */
#define SLUICE__WORD_STORE_BIT ((uint64_t)1 << 63)
#define SLUICE__WORD_RANGE 1

typedef struct sluice__word_ops {
    void (*load)(uint64_t word, uint64_t base_ms, void *state);
    bool (*store)(const void *state, uint64_t base_ms, uint64_t *word);
    int (*decide)(uint64_t word, uint64_t base_ms, const sluice_limit *limit,
                  uint64_t now_ms, uint64_t cost, bool consume,
                  uint64_t *next, sluice_decision *out);
} sluice__word_ops;

/*
 * One algorithm. 'now_ms' is a parameter and must not decrease from one call
 * to the next on the same state (stores clamp it). The state is 'state_size'
 * bytes that the store owns; 'init' makes it fresh and 'release' frees what
 * it points to.
 *
 * decide()   answers the request of 'cost' at 'now_ms' into 'out' and, when
 *            'consume' is true and it is admitted, counts it. 'limit' and
 *            'cost' have been checked (1 <= cost <= max, and <= burst). Returns 0 or a
 *            negative SLUICE_E* (only SLUICE_ENOMEM, where the state grows).
 * idle_at()  the time from which the state is equivalent to a fresh one, so a
 *            store may drop it; 0 when it is fresh already. Asked right
 *            after decide() with the same limit.
 * bytes()    memory the state holds beyond 'state_size', for stats.
 */
typedef struct sluice__algo {
    const char *name;              /* "sliding-log": the public name */
    /* Whether it takes a burst; without, only burst 0 is a valid limit. */
    bool has_burst;
    /* Bounds of its own beyond the common ones (sluice_limit_check()), or
       NULL: answers 0, or an error with its message set. */
    int (*check)(const sluice_limit *limit);
    size_t state_size;
    void (*init)(void *state);
    int (*decide)(void *state, const sluice_limit *limit, uint64_t now_ms,
                  uint64_t cost, bool consume, sluice_decision *out);
    uint64_t (*idle_at)(const void *state, const sluice_limit *limit);
    size_t (*bytes)(const void *state);
    void (*release)(void *state);
    /* Where decide() allocates: makes room so that a decide() with the
       same arguments and 'consume' that admits cannot fail for memory, and
       changes no decision (sluice_hit_all() reserves every limit before it
       counts in any). NULL where decide() never allocates. */
    int (*reserve)(void *state, const sluice_limit *limit, uint64_t now_ms,
                   uint64_t cost);
    /* Its lock-free form (above), or NULL: the store always locks. */
    const sluice__word_ops *word;
} sluice__algo;

/* ---- The server part ----------------------------------------------------- */

/*
 * What a store on a server (the client's valkey/ stores, the guard around
 * them) and the server module need of an algorithm, beyond its pure table.
 */
typedef struct sluice__algo_server {
    /* What its key holds on a server ("a sorted set"), for the message when
       a key holds something else. */
    const char *value;
    /* Whether a server store remembers its refusals by default
       (refused_cache=default): only where a refusal is certain to stand
       until its wait ends, whatever else arrives meanwhile. */
    bool refused_cache_default;
    /* The furthest reset_after_ms its script answers, in windows (a reply
       beyond is wrong); 0 when it has no bound of its own. */
    uint64_t reset_windows;
} sluice__algo_server;

/* ---- Every algorithm -------------------------------------------------------- */

/* Each algorithm's tables and script, named after its folder. */
#define SLUICE__ALGO_DECLARE(name, val, folder)                   \
    extern const sluice__algo sluice__algo_##folder;               \
    extern const sluice__algo_server sluice__algo_server_##folder; \
    extern const sluice__script sluice__script_##folder;
SLUICE_ALGO_MAP(SLUICE__ALGO_DECLARE)
#undef SLUICE__ALGO_DECLARE

/* The tables, indexed by sluice_algo: the pure ones (algo.c), the server
   parts (server.c) and the scripts (scripts.c). */
extern const sluice__algo *const sluice__algos[SLUICE__ALGO_N];
extern const sluice__algo_server *const sluice__algo_servers[SLUICE__ALGO_N];
extern const sluice__script *const sluice__algo_scripts[SLUICE__ALGO_N];

/*
 * Decides on 'word' as 'algo' does (its word decide(), else load(), decide(),
 * store()): see sluice__word_ops. 'algo' has a word.
 */
int sluice__word_decide(const sluice__algo *algo, uint64_t word,
                        uint64_t base_ms, const sluice_limit *limit,
                        uint64_t now_ms, uint64_t cost, bool consume,
                        uint64_t *next, sluice_decision *out);

/*
 * Checks a request before any store sees it: a valid limit,
 * 1 <= cost <= max, and cost <= burst when the limit has one (SLUICE_ECOST
 * beyond either). Sets sluice_last_error() on failure.
 */
int sluice__request_check(const sluice_limit *limit, uint64_t cost);

/* The most units 'limit' admits at once: its burst, 0 meaning max (every
   algorithm without a burst has 0). */
static inline uint64_t sluice__limit_burst(const sluice_limit *limit)
{
    return limit->burst != 0 ? limit->burst : limit->max;
}

/*
 * For an algorithm whose figures reach max x window_ms (in units of 1/max
 * ms, or a count weighted by ms): SLUICE_OK if that product is at most 2^53,
 * so it stays exact in the Lua mirror's doubles; else SLUICE_ERANGE with a
 * message naming algorithm 'name'.
 */
int sluice__product_check(const sluice_limit *limit, const char *name);

#endif /* SLUICE_ALGO_H */
