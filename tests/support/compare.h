/*
 * compare.h - two decisions held against each other field by field, for
 * the tests that compare one store (or a model) with another.
 *
 * A decision's answer is allowed, limit, remaining, retry_after_ms and
 * reset_after_ms; the whole decision adds fallback, which only a store on a
 * server sets (when its failure policy answered). On a mismatch the tests
 * print both sides and the fields that differ.
 */
#ifndef SLUICE_TEST_COMPARE_H
#define SLUICE_TEST_COMPARE_H

#include "sluice.h"

#include <stddef.h>
#include <stdint.h>

/* The distance between two numbers, whichever is larger. */
uint64_t u64_distance(uint64_t a, uint64_t b);

/* True when 'a' and 'b' give the same answer (every field but fallback). */
int decision_same_answer(const sluice_decision *a, const sluice_decision *b);
/* True when 'a' and 'b' are the same in every field. */
int decision_same(const sluice_decision *a, const sluice_decision *b);
/*
 * True when 'a' and 'b' are the same in every field but the waits
 * (retry_after_ms, reset_after_ms), which may differ by 'tolerance_ms': the
 * answers of two servers that each run the fixed window on their own
 * expiry clock.
 */
int decision_close(const sluice_decision *a, const sluice_decision *b,
                   uint64_t tolerance_ms);

/* Writes 'd' as "{allowed 1, limit 10, remaining 9, retry 0, reset 1000}"
   (and ", fallback N" when it is set). */
void decision_format(char *buf, size_t cap, const sluice_decision *d);
/* Writes the fields in which 'a' and 'b' differ, as
   "remaining 3 != 4, retry 0 != 12"; "" when there is none. */
void decision_diff(char *buf, size_t cap, const sluice_decision *a,
                   const sluice_decision *b);
/* Prints one side of a mismatch to stderr, 'who' (e.g. "embedded") first:
   its return code and every field. */
void decision_print(const char *who, int rc, const sluice_decision *d);

/*
 * A check (test.h): 'a' and 'b' give the same answer. On failure it prints
 * both, named 'ea' and 'eb', and the fields that differ, at 'file':'line'.
 */
int check_same_answer_at(sluice_decision a, sluice_decision b,
                         const char *file, int line, const char *ea,
                         const char *eb);
#define CHECK_SAME(a, b) \
    check_same_answer_at((a), (b), __FILE__, __LINE__, #a, #b)

#endif /* SLUICE_TEST_COMPARE_H */
