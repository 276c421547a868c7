/*
 * algo.c - the table of algorithms, their names, and the checks every request
 * passes before a store sees it.
 */
#include "algo/algo.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const sluice__algo *const sluice__algos[SLUICE__ALGO_N] = {
#define SLUICE__ALGO_ENTRY(name, val, folder) \
    [SLUICE_##name] = &sluice__algo_##folder,
    SLUICE_ALGO_MAP(SLUICE__ALGO_ENTRY)
#undef SLUICE__ALGO_ENTRY
};

unsigned sluice_algo_count(void)
{
    return SLUICE__ALGO_N;
}

const char *sluice_algo_name(sluice_algo algo)
{
    if ((unsigned)algo >= SLUICE__ALGO_N)
        return NULL;
    return sluice__algos[algo]->name;
}

int sluice_algo_parse(sluice_algo *out, const char *name)
{
    char known[256] = "";

    if (out == NULL || name == NULL)
        return sluice__error(SLUICE_EINVAL, "algorithm name is NULL");

    for (int i = 0; i < SLUICE__ALGO_N; i++) {
        if (strcmp(name, sluice__algos[i]->name) == 0) {
            *out = (sluice_algo)i;
            return SLUICE_OK;
        }
        snprintf(known + strlen(known), sizeof(known) - strlen(known),
                 "%s%s", i == 0 ? "" : i + 1 == SLUICE__ALGO_N ? " or " : ", ",
                 sluice__algos[i]->name);
    }
    return sluice__error(SLUICE_EINVAL,
                         "unknown algorithm '%s' (expected %s)", name, known);
}

int sluice_limit_check(const sluice_limit *limit)
{
    const sluice__algo *algo;

    if (limit == NULL)
        return sluice__error(SLUICE_EINVAL, "limit is NULL");
    /* A later header's field, or a limit left uninitialised (sluice.h). */
    for (size_t i = 0; i < sizeof(limit->reserved) / sizeof(limit->reserved[0]);
         i++)
        if (limit->reserved[i] != 0)
            return sluice__error(SLUICE_EINVAL,
                                 "limit's reserved[%zu] is %llu, not 0: a "
                                 "field sluice %s does not know, or a limit "
                                 "not zeroed (use SLUICE_LIMIT() or = {0})",
                                 i, (unsigned long long)limit->reserved[i],
                                 SLUICE_VERSION);
    if ((unsigned)limit->algo >= SLUICE__ALGO_N)
        return sluice__error(SLUICE_EINVAL, "unknown algorithm %d",
                             (int)limit->algo);
    if (limit->max < 1 || limit->max > SLUICE_MAX_MAX)
        return sluice__error(SLUICE_ERANGE,
                             "max %llu is out of range 1..%llu",
                             (unsigned long long)limit->max,
                             (unsigned long long)SLUICE_MAX_MAX);
    if (limit->window_ms < 1 || limit->window_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE,
                             "window %llu ms is out of range 1..%llu ms",
                             (unsigned long long)limit->window_ms,
                             (unsigned long long)SLUICE_WINDOW_MAX_MS);
    algo = sluice__algos[limit->algo];
    if (limit->burst != 0 && !algo->has_burst)
        return sluice__error(SLUICE_EINVAL,
                             "%s has no burst (burst %llu; only 0 is taken)",
                             algo->name, (unsigned long long)limit->burst);
    return algo->check != NULL ? algo->check(limit) : SLUICE_OK;
}

int sluice__product_check(const sluice_limit *limit, const char *name)
{
    uint64_t product;

    if (sluice__mul_overflows(limit->max, limit->window_ms, &product) ||
        product > SLUICE_COUNTER_PRODUCT_MAX)
        return sluice__error(SLUICE_ERANGE,
                             "%s needs max x window_ms <= 2^53 "
                             "(max %llu, window %llu ms)", name,
                             (unsigned long long)limit->max,
                             (unsigned long long)limit->window_ms);
    return SLUICE_OK;
}

int sluice__request_check(const sluice_limit *limit, uint64_t cost)
{
    int err = sluice_limit_check(limit);

    if (err < 0)
        return err;
    if (cost < 1)
        return sluice__error(SLUICE_ERANGE, "cost must be at least 1");
    if (cost > limit->max)
        return sluice__error(SLUICE_ECOST,
                             "cost %llu exceeds max %llu: it can never be "
                             "admitted",
                             (unsigned long long)cost,
                             (unsigned long long)limit->max);
    /* A burst below max is the most a bucket ever holds (limit checked:
       only an algorithm with a burst has one). */
    if (cost > sluice__limit_burst(limit))
        return sluice__error(SLUICE_ECOST,
                             "cost %llu exceeds burst %llu: it can never be "
                             "admitted",
                             (unsigned long long)cost,
                             (unsigned long long)limit->burst);
    return SLUICE_OK;
}

/* What every duration message lists: the forms taken. */
#define DURATION_FORMS                                                  \
    "expected a number of milliseconds, or whole numbers with units in " \
    "descending order, each at most once: d, h, m, s, ms (e.g. 250ms, "  \
    "1s, 1m30s, 1h30m, 2s500ms, 1d)"

/* The units of a duration, largest first: their order is their rank. */
static const struct {
    const char *suffix;
    uint64_t ms;
} duration_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"ms", 1}, {"m", 60000}, {"s", 1000}};

/* The rank of duration_units[i] in the descending order d h m s ms. */
static int duration_rank(size_t i)
{
    static const int rank[] = {0, 1, 4, 2, 3};

    return rank[i];
}

/*
 * Reads one part "NUNIT" at '*p' (digits then a unit; "ms" is tried before
 * "m"): its value in ms into '*ms' and its unit's rank into '*rank', and
 * moves '*p' past it. A bare number is a part of rank 5 only when it is the
 * whole text. Returns 0, or a negative SLUICE_E* (not reported).
 */
static int duration_part(const char **p, const char *text, uint64_t *ms,
                         int *rank)
{
    unsigned long long n;
    char *end;

    if (!isdigit((unsigned char)**p))
        return SLUICE_EINVAL;
    errno = 0;
    n = strtoull(*p, &end, 10);
    if (errno == ERANGE)
        return SLUICE_ERANGE;
    if (*end == '\0' && *p == text) { /* a plain number of ms */
        *ms = n;
        *rank = 5;
        *p = end;
        return SLUICE_OK;
    }
    for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]);
         i++) {
        size_t len = strlen(duration_units[i].suffix);

        if (strncmp(end, duration_units[i].suffix, len) != 0)
            continue;
        if (sluice__mul_overflows(n, duration_units[i].ms, ms))
            return SLUICE_ERANGE;
        *rank = duration_rank(i);
        *p = end + len;
        return SLUICE_OK;
    }
    return SLUICE_EINVAL;
}

/*
 * Durations: a whole number of milliseconds, or one or more parts NUNIT,
 * units in descending order (d, h, m, s, ms) and each at most once, as in
 * "1h30m" or "2s500ms". Signs, spaces, fractions, empty parts, units out
 * of order or repeated, and overflow are refused, naming the text.
 */
int sluice_duration_parse(uint64_t *out_ms, const char *text)
{
    const char *p = text;
    uint64_t total = 0, ms = 0;
    int last = -1, rank = 0, err;

    if (out_ms == NULL || text == NULL)
        return sluice__error(SLUICE_EINVAL, "duration is NULL");
    if (*p == '\0')
        return sluice__error(SLUICE_EINVAL, "invalid duration '' (empty; "
                             DURATION_FORMS ")");
    while (*p != '\0') {
        if ((err = duration_part(&p, text, &ms, &rank)) == SLUICE_ERANGE ||
            (err == SLUICE_OK && (total += ms) < ms))
            return sluice__error(SLUICE_ERANGE, "duration '%s' is too large "
                                 "(at most %llu ms)", text,
                                 (unsigned long long)SLUICE_WINDOW_MAX_MS);
        if (err < 0 || rank <= last)
            return sluice__error(SLUICE_EINVAL, "invalid duration '%s' (%s)",
                                 text, DURATION_FORMS);
        last = rank;
    }
    if (total > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "duration '%s' is too large (at "
                             "most %llu ms)", text,
                             (unsigned long long)SLUICE_WINDOW_MAX_MS);
    if (total == 0)
        return sluice__error(SLUICE_ERANGE,
                             "duration '%s' must be at least 1 ms", text);
    *out_ms = total;
    return SLUICE_OK;
}

int sluice__word_decide(const sluice__algo *algo, uint64_t word,
                        uint64_t base_ms, const sluice_limit *limit,
                        uint64_t now_ms, uint64_t cost, bool consume,
                        uint64_t *next, sluice_decision *out)
{
    _Alignas(8) unsigned char state[64];
    sluice_decision d = *out; /* what decide() does not set, as it was */
    int err;

    if (algo->word->decide != NULL)
        return algo->word->decide(word, base_ms, limit, now_ms, cost, consume,
                                  next, out);
    if (algo->state_size > sizeof(state))
        return SLUICE__WORD_RANGE;
    algo->word->load(word, base_ms, state);
    if ((err = algo->decide(state, limit, now_ms, cost, consume, &d)) < 0)
        return err;
    if (!algo->word->store(state, base_ms, next))
        return SLUICE__WORD_RANGE;
    *out = d;
    return SLUICE_OK;
}
