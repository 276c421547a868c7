/*
 * model.h - the reference models of the algorithms, for the tests only.
 *
 * Each algorithm is written again, independently and as plainly as it can
 * be, from its definition alone, in src/algo/FOLDER/model.c beside the
 * algorithm it mirrors (after rax's tests: a tiny, obviously correct model
 * that the real thing must agree with one operation at a time). The models
 * are compiled into the tests' support library, never into the library;
 * tests/unit/test_model.c holds the embedded store against them.
 *
 * A model keeps a limit's state and answers four plain questions of it at a
 * time 't' (ms): would a request of 'cost' be admitted, how much budget is
 * left, does it hold nothing at all, and (after an admission) count it.
 * Nothing about a decision is computed in closed form:
 * sluice__model_decide() finds retry_after_ms by stepping a copy of the
 * model forward 1 ms at a time until the request would be admitted, and
 * reset_after_ms by stepping until the state after the decision holds
 * nothing (at most 2 x window + 1 steps). So the windows and budgets a
 * model is asked about must stay small.
 *
 * A new algorithm needs a model.c (CMake refuses an algorithm without
 * one), and then every test that loops over sluice__models[] covers it.
 */
#ifndef SLUICE_ALGO_MODEL_H
#define SLUICE_ALGO_MODEL_H

#include "sluice.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest max a model takes (the sliding log keeps a time per unit). */
#define SLUICE__MODEL_MAX 256
/* Room for any model's state, in bytes. */
#define SLUICE__MODEL_STATE_BYTES ((SLUICE__MODEL_MAX + 2) * 8)

struct sluice__model_ops;

/* One limit's model: plain data, copied by assignment. */
typedef struct sluice__model {
    const struct sluice__model_ops *ops;
    sluice_limit limit;
    /* The algorithm's own state, in the layout its model.c gives it
       (SLUICE__MODEL_STATE()); all zero bytes, then init(), is fresh. */
    _Alignas(max_align_t) unsigned char state[SLUICE__MODEL_STATE_BYTES];
} sluice__model;

/* The state of model 'm' as its algorithm's 'type' (const or not). */
#define SLUICE__MODEL_STATE(type, m) ((type *)(m)->state)
/* Refuses to build a model whose state 'type' does not fit. */
#define SLUICE__MODEL_FITS(type)                                  \
    _Static_assert(sizeof(type) <= SLUICE__MODEL_STATE_BYTES,     \
                   #type " does not fit in SLUICE__MODEL_STATE_BYTES")

/* What every algorithm's model answers; 'm->limit' is its limit. */
typedef struct sluice__model_ops {
    /* Makes a zeroed state fresh; NULL when zero bytes are fresh. */
    void (*init)(sluice__model *m);
    /* Would a request of 'cost' be admitted at 't'? */
    bool (*admits)(const sluice__model *m, uint64_t t, uint64_t cost);
    /* Counts an admitted request of 'cost' at 't'. */
    void (*count)(sluice__model *m, uint64_t t, uint64_t cost);
    /* The budget left at 't': the largest cost that would be admitted,
       floor(max - what is counted), at least 0. */
    uint64_t (*remaining)(const sluice__model *m, uint64_t t);
    /* Does the state hold nothing at 't' (the budget is whole)? */
    bool (*whole)(const sluice__model *m, uint64_t t);
    /* The seam: the most units any span of 'window_ms' can admit under a
       limit of 'max' per window, however the requests fall. */
    uint64_t (*span_bound)(uint64_t max, uint64_t window_ms);
    /* On a server, the window ends by the key's expiry on the server's own
       clock, not by the caller's (src/algo/FOLDER/FOLDER.lua): a server's
       waits match the model's, or another server's, only within the real
       time between the calls. */
    bool server_clock;
} sluice__model_ops;

/* Each algorithm's model, named after its folder. */
#define SLUICE__MODEL_DECLARE(name, val, folder) \
    extern const sluice__model_ops sluice__model_##folder;
SLUICE_ALGO_MAP(SLUICE__MODEL_DECLARE)
#undef SLUICE__MODEL_DECLARE

/* The models, indexed by sluice_algo. */
extern const sluice__model_ops *const sluice__models[];

/* Makes 'm' a fresh model of 'limit' (which may be m's own). */
void sluice__model_init(sluice__model *m, const sluice_limit *limit);
/*
 * The model's decision for a request of 'cost' at 'now' into 'out', counted
 * when 'consume'. remaining and reset_after_ms describe the state after the
 * request as a hit would leave it (a peek answers what a hit would).
 */
void sluice__model_decide(sluice__model *m, uint64_t now, uint64_t cost,
                          bool consume, sluice_decision *out);

#endif /* SLUICE_ALGO_MODEL_H */
