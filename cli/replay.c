/*
 * replay.c - 'sluice replay': decides a trace of requests read on stdin.
 *
 * A trace has one request per line, "T KEY [COST]": T in milliseconds, never
 * less than the line before; KEY a token without whitespace; COST 1..max,
 * default 1. Blank lines and lines whose first character that is not a space
 * is '#' are skipped. Each request prints one line:
 *
 *   T KEY COST allowed|denied REMAINING RETRY_AFTER_MS
 *
 * or, with --json, a JSON object of the same fields (JSON Lines).
 *
 * On the embedded store T drives a virtual clock (sluice_vclock), so a replay
 * is deterministic and takes no time. A server store keeps time by real
 * clocks (its own, or the caller's), and keys it holds expire in real time,
 * so there the trace is paced: each request is sent T - T(first line) after
 * the start, its line is flushed as soon as it is decided, and two lines
 * may be at most REPLAY_GAP_MAX_MS apart.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char cli_replay_help[] =
    "Usage: sluice replay --algo ALGO --max N --window DUR [--burst B]\n"
    "                     [--json] [--store URL] < TRACE\n"
    "\n"
    "Decides a trace of requests read on stdin, one per line:\n"
    "\n"
    "  T KEY [COST]    T in milliseconds, never less than the line before;\n"
    "                  KEY without whitespace; COST 1..N (1..B with a\n"
    "                  burst), default 1\n"
    "\n"
    "and prints one line per request:\n"
    "\n"
    "  T KEY COST allowed|denied REMAINING RETRY_AFTER_MS [fallback=POLICY]\n"
    "\n"
    "(the last field only when a server store could not answer and its\n"
    "on_error policy, open or closed, decided; a KEY's control bytes and\n"
    "bytes that are not UTF-8 are written \\xNN). Blank lines and lines\n"
    "starting with '#' are skipped.\n"
    "\n"
    "With --json each line is instead a JSON object (JSON Lines) with the\n"
    "same fields, the decision in the shape 'sluice hit --json' gives it:\n"
    "  {\"t\":0,\"key\":\"a\",\"cost\":1,\"algo\":\"fixed\",\"allowed\":true,\n"
    "   \"limit\":2,\"remaining\":1,\"retry_after_ms\":0,\"reset_after_ms\":1000,\n"
    "   \"counted\":true}\n"
    "\n"
    "On the embedded store (mem://, the default) T drives a virtual clock\n"
    "that starts at 0, so a replay is deterministic and instant;\n"
    "sliding-counter windows are aligned to multiples of the window from\n"
    "T = 0. On a server store (valkey://) time is real: the trace is paced,\n"
    "each request sent T minus the first line's T after the start, and its\n"
    "line written at once (so a pipe has it should the replay be stopped).\n"
    "A paced replay waits at most 1h between two lines: a line whose T is\n"
    "more than 1h after the previous line's is an error of that line.\n"
    "\n"
    "  --algo ALGO    @ALGOS@\n"
    "  --max N        units admitted per window, 1..@MAX@\n"
    "  --window DUR   250ms, 1s, 1m30s, 1h, 1d (units d, h, m, s, ms,\n"
    "                 largest first, each once) or a number of ms\n"
    "  --burst B      units admitted at once, 1..N (default N): only\n"
    "                 @BURST_ALGOS@\n"
    "  --json         a JSON object per request instead of a line of text\n"
    "  --store URL    mem:// (default) or valkey://HOST[:PORT][?OPTIONS]\n"
    CLI_STORE_FILE_HELP
    "\n"
    "Example:\n"
    "  printf '0 a\\n10 a\\n20 a 2\\n' | sluice replay --algo fixed --max 2"
    " --window 1s\n"
    "\n"
    "Exit status: 0 the trace was replayed (whatever was refused), 2 usage\n"
    "error or a malformed line (reported with its number), 3 store error.\n";

/* ---- Lines ----------------------------------------------------------------- */

#define FIELDS_MAX 4 /* T KEY COST, and one more to detect extra fields */

/*
 * Splits 'line' (of 'len' bytes, NUL-terminated) in place into at most
 * FIELDS_MAX whitespace-separated fields; returns how many there are, capped
 * at FIELDS_MAX.
 */
static int split_fields(char *line, size_t len, char *fields[FIELDS_MAX])
{
    int n = 0;
    size_t i = 0;

    while (i < len && n < FIELDS_MAX) {
        while (i < len && strchr(" \t\r\n\v\f", line[i]) != NULL)
            i++;
        if (i == len)
            break;
        fields[n++] = &line[i];
        while (i < len && strchr(" \t\r\n\v\f", line[i]) == NULL)
            i++;
        if (i < len)
            line[i++] = '\0';
    }
    return n;
}

/* ---- Pacing ---------------------------------------------------------------- */

/* The longest wait between two lines of a paced replay: 1h. A later line is
   an error of the trace, not hours of waiting. */
#define REPLAY_GAP_MAX_MS 3600000u

/* Sleeps until 'offset_ms' after 'start' on the monotonic clock. */
static void sleep_until(const struct timespec *start, uint64_t offset_ms)
{
    struct timespec at = *start;

    at.tv_sec += (time_t)(offset_ms / 1000);
    at.tv_nsec += (long)(offset_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
        ;
}

/* ---- The trace --------------------------------------------------------------- */

/* One request of the trace. */
typedef struct request {
    uint64_t t;      /* ms */
    const char *key; /* points into the line */
    uint64_t cost;
} request;

/* Where the replay is in the trace, and the time it keeps. */
typedef struct progress {
    unsigned long long lineno;
    bool seen;              /* a request was decided */
    uint64_t first_t, prev_t;
    struct timespec start;  /* when the first request was sent */
    bool json;              /* --json: a JSON object per line */
} progress;

/*
 * Reports that line 'lineno' of the trace is malformed: "replay: line N: "
 * and the formatted text. Returns -1.
 */
static int line_error(unsigned long long lineno, const char *fmt, ...)
    CLI_PRINTF(2, 3);

static int line_error(unsigned long long lineno, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    cli_error("replay: line %llu: %s", lineno, text);
    return -1;
}

/*
 * Reads the request on 'line' (of 'len' bytes, NUL-terminated; split in
 * place) into 'req', checking it against the trace so far 'pr' and the
 * limit's 'max'. Returns 1 for a request, 0 for a line to skip (blank or a
 * comment), or -1 for a malformed line (reported).
 */
static int parse_line(request *req, char *line, size_t len,
                      const progress *pr, const sluice_limit *limit)
{
    char *fields[FIELDS_MAX];
    char why[256];
    int n;

    if (memchr(line, '\0', len) != NULL)
        return line_error(pr->lineno, "contains a NUL byte");
    n = split_fields(line, len, fields);
    if (n == 0 || fields[0][0] == '#')
        return 0;
    if (!cli_parse_u64(&req->t, fields[0], 0, SLUICE_NOW_MAX_MS, why,
                       sizeof(why)))
        return line_error(pr->lineno, "time: %s", why);
    if (pr->seen && req->t < pr->prev_t)
        return line_error(pr->lineno, "time %llu is before the previous "
                          "line's %llu", (unsigned long long)req->t,
                          (unsigned long long)pr->prev_t);
    if (n < 2)
        return line_error(pr->lineno, "missing KEY after the time "
                          "(expected 'T KEY [COST]')");
    if (n > 3)
        return line_error(pr->lineno, "unexpected field '%s' (expected "
                          "'T KEY [COST]')", cli_shown(fields[3]));
    req->key = fields[1];
    req->cost = 1;
    if (n == 3 && !cli_parse_u64(&req->cost, fields[2], 1, SLUICE_MAX_MAX,
                                 why, sizeof(why)))
        return line_error(pr->lineno, "cost: %s", why);
    if (!cli_cost_fits(req->cost, limit, why, sizeof(why)))
        return line_error(pr->lineno, "cost %s", why);
    return 1;
}

/*
 * Prints request 'req''s line: the text columns, or with 'json' (--json)
 * an object of the same fields in the shape 'sluice hit
 * --json' gives a decision (cli.h), plus "t" and "cost": JSON Lines.
 */
static void print_line(const request *req, const sluice_limit *limit,
                       const sluice_decision *d, bool json)
{
    const char *fallback = cli_fallback_name(d);

    if (json) {
        printf("{\"t\":%llu,\"key\":", (unsigned long long)req->t);
        cli_json_string(stdout, req->key, strlen(req->key));
        printf(",\"cost\":%llu,\"algo\":\"%s\",",
               (unsigned long long)req->cost, sluice_algo_name(limit->algo));
        cli_json_decision(stdout, d,
                          d->allowed && d->fallback == SLUICE_ANSWERED);
        printf("}\n");
        return;
    }
    printf("%llu ", (unsigned long long)req->t);
    cli_put_safe(stdout, req->key, strlen(req->key), false);
    printf(" %llu %s %llu %llu", (unsigned long long)req->cost,
           d->allowed ? "allowed" : "denied", (unsigned long long)d->remaining,
           (unsigned long long)d->retry_after_ms);
    if (fallback != NULL)
        printf(" fallback=%s", fallback);
    printf("\n");
}

/*
 * Decides 'req' on 'store' with 'limit' at its time: on 'vclock' when the
 * store runs on one, else by waiting until its time has come since the
 * first request ('pr', which it updates). Prints the line of the decision.
 * Returns the exit status.
 */
static int decide(const request *req, sluice_store *store,
                  const sluice_limit *limit, sluice_vclock *vclock,
                  progress *pr)
{
    uint64_t prev_t = pr->seen ? pr->prev_t : req->t;
    sluice_decision d;
    int err;

    if (vclock == NULL && req->t - prev_t > REPLAY_GAP_MAX_MS) {
        line_error(pr->lineno, "time %llu is more than 1h after the previous "
                   "line's %llu: a paced replay waits at most 1h between two "
                   "lines", (unsigned long long)req->t,
                   (unsigned long long)prev_t);
        return CLI_EXIT_USAGE;
    }
    if (!pr->seen) {
        pr->first_t = req->t;
        clock_gettime(CLOCK_MONOTONIC, &pr->start);
    }
    pr->seen = true;
    pr->prev_t = req->t;
    if (vclock != NULL)
        sluice_vclock_set(vclock, req->t);
    else
        sleep_until(&pr->start, req->t - pr->first_t);
    err = sluice_hit(&d, store, limit, req->key, strlen(req->key), req->cost);
    if (err < 0) {
        char what[64];

        snprintf(what, sizeof(what), "replay: line %llu", pr->lineno);
        return cli_lib_error(NULL, what, err);
    }
    print_line(req, limit, &d, pr->json);
    /* Paced, the server has counted the request: its line is written at
       once, so that a pipe gets it even if the replay is stopped. */
    if (vclock == NULL)
        fflush(stdout);
    return CLI_EXIT_OK;
}

/*
 * Reads the trace from 'in' and decides each request on 'store' with
 * 'limit'. 'vclock' is the store's clock, or NULL when the store keeps time
 * itself. Returns the exit status.
 */
static int replay(FILE *in, sluice_store *store, const sluice_limit *limit,
                  sluice_vclock *vclock, bool json)
{
    progress pr = {.json = json};
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int status = CLI_EXIT_OK;

    while (status == CLI_EXIT_OK && (got = getline(&line, &cap, in)) != -1) {
        request req;
        int found;

        pr.lineno++;
        found = parse_line(&req, line, (size_t)got, &pr, limit);
        if (found < 0)
            status = CLI_EXIT_USAGE;
        else if (found > 0)
            status = decide(&req, store, limit, vclock, &pr);
    }
    if (status == CLI_EXIT_OK && ferror(in)) {
        cli_error("replay: cannot read the trace: %s", strerror(errno));
        status = CLI_EXIT_RUNTIME;
    }
    free(line);
    return status;
}

/* ---- The command --------------------------------------------------------------- */

int cli_replay(int argc, char **argv)
{
    unsigned takes = CLI_TAKES_ALGO | CLI_TAKES_MAX | CLI_TAKES_WINDOW |
                     CLI_TAKES_STORE | CLI_TAKES_BURST | CLI_TAKES_JSON;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_store *store = NULL;
    sluice_vclock *vclock = NULL;
    cli_request args;
    int err, status;

    if ((status = cli_request_parse(&args, "replay", argc, argv, takes)) != 0 ||
        (status = cli_request_require(&args, "replay",
                                      takes & ~(CLI_TAKES_STORE |
                                                CLI_TAKES_BURST |
                                                CLI_TAKES_JSON))) != 0)
        return status;
    /* Virtual time for the embedded store; real clocks for a server. */
    if (cli_url_is_embedded(args.store)) {
        if ((err = sluice_vclock_new(&vclock, 0)) < 0) {
            cli_error("replay: %s", sluice_last_error());
            return CLI_EXIT_RUNTIME;
        }
        opts.clock_ms = sluice_vclock_now_ms;
        opts.clock_payload = vclock;
    }
    if ((status = cli_store_open(&store, "replay", args.store, NULL,
                                 &opts)) != 0) {
        sluice_vclock_free(vclock);
        return status;
    }
    status = replay(stdin, store, &args.limit, vclock, args.json);
    sluice_store_free(store);
    sluice_vclock_free(vclock);
    return status;
}
