/*
 * report.c - what the table (text.c) and the JSON (json.c) share: the
 * ratio of two cases' rates, and the targets the issue sets.
 */
#include "bench_server.h"

/* The targets the issue sets (fixed window, C callers, 10,000 keys). */
#define TARGET_VS_INCR 1.0
#define TARGET_VS_RLF 3.0
#define TARGET_VS_LIMITS 10.0
/* The same, pipelined: sluice_hit_many() batches of C requests. */
#define TARGET_PIPELINED_VS_INCR 2.0
#define TARGET_PIPELINED_VS_RLF 3.0
#define TARGET_PIPELINED_VS_LIMITS 10.0
/* A hot refused key (C callers): the cache of refused keys on / off. */
#define TARGET_REFUSED_CACHE 10.0
/* The native module (C callers, 10,000 keys) over redis-benchmark INCR. */
#define TARGET_MODULE_VS_INCR 1.5

/* The median rate of case 'num' over that of case 'den'; -1 if unknown. */
double ratio(const report *rp, int num, int den)
{
    const bench_case *a, *b;

    if (num < 0 || den < 0)
        return -1;
    a = &rp->cases[num];
    b = &rp->cases[den];
    if (a->nruns == 0 || b->nruns == 0 || b->med.rate <= 0)
        return -1;
    return a->med.rate / b->med.rate;
}

/* Why ratio(num, den) is unknown: the reason of a case that did not run. */
const char *ratio_why(const report *rp, int num, int den)
{
    if (num < 0 || den < 0)
        return "no such case";
    if (rp->cases[num].nruns == 0)
        return rp->cases[num].unavailable;
    return rp->cases[den].unavailable;
}

/*
 * The pipelined sluice row of the targets: the faster of the fixed
 * window's hit_many rows at 'callers' callers and 10,000 keys (1 thread, 2
 * threads); the first when neither ran.
 */
int best_many_fixed(const report *rp)
{
    int one = rp->many_case[3][SLUICE_FIXED], two = rp->many2_case[3];

    if (one < 0 || two < 0 || rp->cases[two].nruns == 0)
        return one;
    if (rp->cases[one].nruns == 0 ||
        rp->cases[two].med.rate > rp->cases[one].med.rate)
        return two;
    return one;
}

/*
 * The targets on the fixed window, C callers and 10,000 keys: sluice_hit()
 * ("fixed_many_n"), and the faster hit_many row ("fixed_pipelined"), over
 * each reference.
 */
static const struct target_row {
    const char *name;
    const char *label;
    bool piped; /* the faster hit_many row, else sluice_hit() */
    int ref;    /* REF_... */
    double min;
} target_rows[] = {
    [TARGET_FIXED_INCR] = {"fixed_many_n_over_redis_benchmark_incr",
                           "/ redis-benchmark INCR", false, REF_RB,
                           TARGET_VS_INCR},
    [TARGET_FIXED_RLF] = {"fixed_many_n_over_rlf", "/ rate-limiter-flexible",
                          false, REF_RLF, TARGET_VS_RLF},
    [TARGET_FIXED_LIMITS] = {"fixed_many_n_over_limits_fixed",
                             "/ limits fixed window", false,
                             REF_LIMITS_FIXED, TARGET_VS_LIMITS},
    [TARGET_PIPED_INCR] = {"fixed_pipelined_over_redis_benchmark_incr",
                           "/ redis-benchmark INCR -c %u", true, REF_RB,
                           TARGET_PIPELINED_VS_INCR},
    [TARGET_PIPED_RLF] = {"fixed_pipelined_over_rlf",
                          "/ rate-limiter-flexible", true, REF_RLF,
                          TARGET_PIPELINED_VS_RLF},
    [TARGET_PIPED_LIMITS] = {"fixed_pipelined_over_limits_fixed",
                             "/ limits fixed window", true,
                             REF_LIMITS_FIXED, TARGET_PIPELINED_VS_LIMITS},
};

/* The targets, in order: those above, then the hot refused key's. */
void targets_get(const report *rp, target t[NTARGETS])
{
    int fixed = rp->sluice_case[3][SLUICE_FIXED], piped = best_many_fixed(rp);

    for (int i = 0; i < TARGET_REFUSED; i++) {
        const struct target_row *row = &target_rows[i];

        t[i].name = row->name;
        snprintf(t[i].label, sizeof(t[i].label), row->label, rp->o.callers);
        t[i].num = row->piped ? piped : fixed;
        t[i].ref = rp->ref_case[3][row->ref];
        t[i].min = row->min;
    }
    t[TARGET_REFUSED] = (target){"refused_hot_cache_on_over_off",
                                 "refused_cache on / off", rp->refused_case,
                                 rp->refused_off_case, TARGET_REFUSED_CACHE};
    t[TARGET_MODULE_INCR] = (target){"module_fixed_over_redis_benchmark_incr",
                                     "", rp->module_case,
                                     rp->ref_case[3][REF_RB],
                                     TARGET_MODULE_VS_INCR};
    snprintf(t[TARGET_MODULE_INCR].label, sizeof(t[0].label),
             "/ redis-benchmark INCR -c %u", rp->o.callers);
}
