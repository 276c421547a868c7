/*
 * compare.c - decisions compared field by field (compare.h).
 */
#include "compare.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>

uint64_t u64_distance(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

int decision_same_answer(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms;
}

int decision_same(const sluice_decision *a, const sluice_decision *b)
{
    return decision_same_answer(a, b) && a->fallback == b->fallback;
}

int decision_close(const sluice_decision *a, const sluice_decision *b,
                   uint64_t tolerance_ms)
{
    return a->allowed == b->allowed && a->remaining == b->remaining &&
           a->limit == b->limit && a->fallback == b->fallback &&
           u64_distance(a->retry_after_ms, b->retry_after_ms) <=
               tolerance_ms &&
           u64_distance(a->reset_after_ms, b->reset_after_ms) <= tolerance_ms;
}

void decision_format(char *buf, size_t cap, const sluice_decision *d)
{
    int n = snprintf(buf, cap,
                     "{allowed %d, limit %" PRIu64 ", remaining %" PRIu64
                     ", retry %" PRIu64 ", reset %" PRIu64,
                     d->allowed, d->limit, d->remaining, d->retry_after_ms,
                     d->reset_after_ms);

    if (n < 0 || (size_t)n >= cap)
        return;
    if (d->fallback != 0)
        snprintf(buf + n, cap - (size_t)n, ", fallback %d}", (int)d->fallback);
    else
        snprintf(buf + n, cap - (size_t)n, "}");
}

/* Appends ", NAME A != B" to 'buf' (of 'cap' bytes, 'used' taken). */
static size_t diff_field(char *buf, size_t cap, size_t used, const char *name,
                         uint64_t a, uint64_t b)
{
    int n;

    if (a == b || used >= cap)
        return used;
    n = snprintf(buf + used, cap - used, "%s%s %" PRIu64 " != %" PRIu64,
                 used > 0 ? ", " : "", name, a, b);
    return n < 0 ? used : used + (size_t)n;
}

void decision_diff(char *buf, size_t cap, const sluice_decision *a,
                   const sluice_decision *b)
{
    size_t used = 0;

    if (cap == 0)
        return;
    buf[0] = '\0';
    used = diff_field(buf, cap, used, "allowed", (uint64_t)a->allowed,
                      (uint64_t)b->allowed);
    used = diff_field(buf, cap, used, "limit", a->limit, b->limit);
    used = diff_field(buf, cap, used, "remaining", a->remaining, b->remaining);
    used = diff_field(buf, cap, used, "retry", a->retry_after_ms,
                      b->retry_after_ms);
    used = diff_field(buf, cap, used, "reset", a->reset_after_ms,
                      b->reset_after_ms);
    diff_field(buf, cap, used, "fallback", (uint64_t)a->fallback,
               (uint64_t)b->fallback);
}

void decision_print(const char *who, int rc, const sluice_decision *d)
{
    fprintf(stderr,
            "      %-8s rc=%d (%s) allowed=%d limit=%" PRIu64
            " remaining=%" PRIu64 " retry_after_ms=%" PRIu64
            " reset_after_ms=%" PRIu64 " fallback=%d\n",
            who, rc, sluice_err_name(rc), d->allowed, d->limit, d->remaining,
            d->retry_after_ms, d->reset_after_ms, (int)d->fallback);
}

int check_same_answer_at(sluice_decision a, sluice_decision b,
                         const char *file, int line, const char *ea,
                         const char *eb)
{
    char sa[160], sb[160], diff[256], what[768];

    if (decision_same_answer(&a, &b))
        return test_check_at(1, file, line, NULL);
    decision_format(sa, sizeof(sa), &a);
    decision_format(sb, sizeof(sb), &b);
    decision_diff(diff, sizeof(diff), &a, &b);
    snprintf(what, sizeof(what), "%s == %s: %s != %s (%s)", ea, eb, sa, sb,
             diff);
    return test_check_at(0, file, line, what);
}
