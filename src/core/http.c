/*
 * http.c - the IETF RateLimit and RateLimit-Policy header fields of a
 * decision, and Retry-After: pure formatting, no I/O, no allocation.
 *
 * The syntax is draft-ietf-httpapi-ratelimit-headers-11 (May 2026). Both
 * fields are Structured Field (RFC 9651) Lists; sluice writes one Item in
 * each, named by a String (section 3: "The Item[SF] value MUST be a
 * String[SF]"):
 *
 *   RateLimit-Policy: "default";q=100;w=60   (section 3.1: q the quota in
 *                                             requests, w the window in s)
 *   RateLimit: "default";r=50;t=30           (section 4.1: r the quota left,
 *                                             t the seconds it holds for)
 *
 * What the numbers are, from a decision:
 *   - q is the limit's max and w its window, in whole seconds rounded up
 *     (the draft has no sub-second windows: 5 per 250 ms is sent as 5 per
 *     1 s, which a client that obeys it never exceeds);
 *   - r is what the decision left (d->remaining);
 *   - t is, for an admission, the time until the budget is whole again
 *     (d->reset_after_ms), and for a refusal the wait before the same
 *     request is admitted (d->retry_after_ms), both rounded up: a client
 *     that waits t seconds never comes back too early;
 *   - Retry-After (RFC 9110 section 10.2.3, delay-seconds) is the refusal's
 *     t, so it never points before the end of the effective window
 *     (section 6 of the draft). An admission has none: the empty string.
 *
 * An SF Integer has at most 15 digits, and a limit's max may have 16
 * (SLUICE_MAX_MAX is 2^53 - 1), so q, r and t are clamped to 10^15 - 1.
 * Retry-After is not an SF Integer and is written in full.
 *
 * The name is written inside the String's quotes unescaped, so it is
 * checked against the SF Token rule (RFC 9651 section 3.3.4), whose
 * characters never need escaping in a String: a name may be used as either.
 */
#include "core/core.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The largest SF Integer (RFC 9651 section 3.3.1: at most 15 digits). */
#define SF_INT_MAX ((uint64_t)999999999999999ULL)

/* The numbers of the three fields, worked out once. */
typedef struct fields {
    const char *name;
    uint64_t q, w;     /* RateLimit-Policy */
    uint64_t r, t;     /* RateLimit */
    bool refused;      /* Retry-After only for a refusal */
    uint64_t retry_s;  /* Retry-After, unclamped */
} fields;

/* ---- Checks -------------------------------------------------------------- */

/* RFC 9110's tchar, which an SF Token is made of (with ':' and '/'). */
static bool tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" ) */
static bool sf_token(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;

    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '*'))
        return false;
    for (p++; *p != '\0'; p++)
        if (!tchar(*p) && *p != ':' && *p != '/')
            return false;
    return true;
}

/* ---- Numbers ------------------------------------------------------------- */

/* Whole seconds, rounded up: 1 ms is 1 s, 1000 ms is 1 s, 1001 ms is 2 s. */
static uint64_t ceil_seconds(uint64_t ms)
{
    return ms / 1000 + (ms % 1000 != 0);
}

static uint64_t sf_int(uint64_t v)
{
    return v > SF_INT_MAX ? SF_INT_MAX : v;
}

static void fields_of(fields *f, const sluice_decision *d,
                      const sluice_limit *limit, const char *name)
{
    f->name = name;
    f->q = sf_int(limit->max);
    f->w = sf_int(ceil_seconds(limit->window_ms));
    f->r = sf_int(d->remaining);
    f->refused = !d->allowed;
    f->retry_s = f->refused ? ceil_seconds(d->retry_after_ms) : 0;
    f->t = sf_int(f->refused ? f->retry_s : ceil_seconds(d->reset_after_ms));
}

/* ---- Formatting ---------------------------------------------------------- */

/* Each writes its field's value into 'buf' as snprintf() does, so a call
   with (NULL, 0) measures it. */
static int format_ratelimit(const fields *f, char *buf, size_t cap)
{
    return snprintf(buf, cap, "\"%s\";r=%" PRIu64 ";t=%" PRIu64, f->name,
                    f->r, f->t);
}

static int format_policy(const fields *f, char *buf, size_t cap)
{
    return snprintf(buf, cap, "\"%s\";q=%" PRIu64 ";w=%" PRIu64, f->name,
                    f->q, f->w);
}

static int format_retry(const fields *f, char *buf, size_t cap)
{
    if (!f->refused)
        return snprintf(buf, cap, "%s", "");
    return snprintf(buf, cap, "%" PRIu64, f->retry_s);
}

typedef int (*formatter)(const fields *f, char *buf, size_t cap);

/* SLUICE_ERANGE, naming the field, when 'buf' (not NULL) cannot hold it
   and its NUL. */
static int fits(formatter fmt, const fields *f, const char *buf, size_t cap,
                const char *what)
{
    int need = fmt(f, NULL, 0);

    if (buf == NULL)
        return SLUICE_OK;
    if (need < 0 || (size_t)need >= cap)
        return sluice__error(SLUICE_ERANGE,
                             "%s needs a buffer of %d bytes; it has %zu",
                             what, need + 1, cap);
    return SLUICE_OK;
}

/*
 * Every check comes before the first byte is written, so a call that fails
 * leaves all three buffers as they were.
 */
int sluice_http_headers(const sluice_decision *d, const sluice_limit *limit,
                        const char *name, char *ratelimit,
                        size_t ratelimit_cap, char *policy, size_t policy_cap,
                        char *retry_after, size_t retry_after_cap)
{
    fields f;
    int rc;

    if (d == NULL || limit == NULL || name == NULL)
        return sluice__error(SLUICE_EINVAL, "sluice_http_headers: NULL "
                                            "decision, limit or name");
    if (!sf_token(name))
        return sluice__error(SLUICE_EINVAL,
                             "policy name \"%.64s\" is not a token (RFC 9651 "
                             "section 3.3.4: a letter or '*', then tchar, ':' "
                             "or '/')", name);
    if ((rc = sluice_limit_check(limit)) != SLUICE_OK)
        return rc;
    fields_of(&f, d, limit, name);
    if ((rc = fits(format_ratelimit, &f, ratelimit, ratelimit_cap,
                   "RateLimit")) != SLUICE_OK ||
        (rc = fits(format_policy, &f, policy, policy_cap,
                   "RateLimit-Policy")) != SLUICE_OK ||
        (rc = fits(format_retry, &f, retry_after, retry_after_cap,
                   "Retry-After")) != SLUICE_OK)
        return rc;
    if (ratelimit != NULL)
        format_ratelimit(&f, ratelimit, ratelimit_cap);
    if (policy != NULL)
        format_policy(&f, policy, policy_cap);
    if (retry_after != NULL)
        format_retry(&f, retry_after, retry_after_cap);
    return SLUICE_OK;
}
