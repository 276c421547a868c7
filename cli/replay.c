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
 * On the embedded store T drives a virtual clock (sluice_vclock), so a replay
 * is deterministic and takes no time. A server store keeps time by real
 * clocks (its own, or the caller's), and keys it holds expire in real time,
 * so there the trace is paced: each request is sent T - T(first line) after
 * the start.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char cli_replay_help[] =
    "Usage: sluice replay --algo ALGO --max N --window DUR [--store URL]"
    " < TRACE\n"
    "\n"
    "Decides a trace of requests read on stdin, one per line:\n"
    "\n"
    "  T KEY [COST]    T in milliseconds, never less than the line before;\n"
    "                  KEY without whitespace; COST 1..N, default 1\n"
    "\n"
    "and prints one line per request:\n"
    "\n"
    "  T KEY COST allowed|denied REMAINING RETRY_AFTER_MS [fallback=POLICY]\n"
    "\n"
    "(the last field only when a server store could not answer and its\n"
    "on_error policy, open or closed, decided). Blank lines and lines\n"
    "starting with '#' are skipped.\n"
    "\n"
    "On the embedded store (mem://, the default) T drives a virtual clock\n"
    "that starts at 0, so a replay is deterministic and instant;\n"
    "sliding-counter windows are aligned to multiples of the window from\n"
    "T = 0. On a server store (valkey://) time is real: the trace is paced,\n"
    "each request sent T minus the first line's T after the start.\n"
    "\n"
    "  --algo ALGO    @ALGOS@\n"
    "  --max N        units admitted per window, 1..@MAX@\n"
    "  --window DUR   250ms, 1s, 1m, 1h, or a number of milliseconds\n"
    "  --store URL    mem:// (default) or valkey://HOST[:PORT][?OPTIONS]\n"
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

/* ---- The command ----------------------------------------------------------- */

/*
 * Reads the trace from 'in' and decides each request on 'store' with
 * 'limit'. 'vclock' is the store's clock, or NULL when the store keeps time
 * itself. Returns the exit status.
 */
static int replay(FILE *in, sluice_store *store, const sluice_limit *limit,
                  sluice_vclock *vclock)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned long long lineno = 0;
    uint64_t prev_t = 0, first_t = 0;
    bool seen = false;
    struct timespec start;
    int status = CLI_EXIT_OK;
    char why[256];

    while ((got = getline(&line, &cap, in)) != -1) {
        char *fields[FIELDS_MAX];
        uint64_t t, cost = 1;
        sluice_decision d;
        int n, err;

        lineno++;
        if (memchr(line, '\0', (size_t)got) != NULL) {
            cli_error("replay: line %llu: contains a NUL byte", lineno);
            status = CLI_EXIT_USAGE;
            break;
        }
        n = split_fields(line, (size_t)got, fields);
        if (n == 0 || fields[0][0] == '#')
            continue;
        if (!cli_parse_u64(&t, fields[0], 0, SLUICE_NOW_MAX_MS, why,
                           sizeof(why))) {
            cli_error("replay: line %llu: time: %s", lineno, why);
            status = CLI_EXIT_USAGE;
            break;
        }
        if (seen && t < prev_t) {
            cli_error("replay: line %llu: time %llu is before the previous "
                      "line's %llu", lineno, (unsigned long long)t,
                      (unsigned long long)prev_t);
            status = CLI_EXIT_USAGE;
            break;
        }
        if (n < 2) {
            cli_error("replay: line %llu: missing KEY after the time "
                      "(expected 'T KEY [COST]')", lineno);
            status = CLI_EXIT_USAGE;
            break;
        }
        if (n > 3) {
            cli_error("replay: line %llu: unexpected field '%s' (expected "
                      "'T KEY [COST]')", lineno, cli_shown(fields[3]));
            status = CLI_EXIT_USAGE;
            break;
        }
        if (n == 3 && !cli_parse_u64(&cost, fields[2], 1, SLUICE_MAX_MAX, why,
                                     sizeof(why))) {
            cli_error("replay: line %llu: cost: %s", lineno, why);
            status = CLI_EXIT_USAGE;
            break;
        }
        if (!cli_cost_fits(cost, limit->max, why, sizeof(why))) {
            cli_error("replay: line %llu: cost %s", lineno, why);
            status = CLI_EXIT_USAGE;
            break;
        }

        if (!seen) {
            first_t = t;
            clock_gettime(CLOCK_MONOTONIC, &start);
        }
        seen = true;
        prev_t = t;
        if (vclock != NULL)
            sluice_vclock_set(vclock, t);
        else
            sleep_until(&start, t - first_t);
        err = sluice_hit(&d, store, limit, fields[1], strlen(fields[1]), cost);
        if (err < 0) {
            char what[64];

            snprintf(what, sizeof(what), "replay: line %llu", lineno);
            status = cli_lib_error(NULL, what, err);
            break;
        }
        printf("%llu %s %llu %s %llu %llu%s\n", (unsigned long long)t,
               fields[1], (unsigned long long)cost,
               d.allowed ? "allowed" : "denied",
               (unsigned long long)d.remaining,
               (unsigned long long)d.retry_after_ms,
               d.fallback == SLUICE_FELL_OPEN     ? " fallback=open"
               : d.fallback == SLUICE_FELL_CLOSED ? " fallback=closed"
                                                  : "");
    }
    if (status == CLI_EXIT_OK && ferror(in)) {
        cli_error("replay: cannot read the trace: %s", strerror(errno));
        status = CLI_EXIT_RUNTIME;
    }
    free(line);
    return status;
}

int cli_replay(int argc, char **argv)
{
    unsigned takes = CLI_TAKES_ALGO | CLI_TAKES_MAX | CLI_TAKES_WINDOW |
                     CLI_TAKES_STORE;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_store *store = NULL;
    sluice_vclock *vclock = NULL;
    cli_request args;
    int err, status;

    if ((status = cli_request_parse(&args, "replay", argc, argv, takes)) != 0 ||
        (status = cli_request_require(&args, "replay",
                                      takes & ~CLI_TAKES_STORE)) != 0)
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
    status = replay(stdin, store, &args.limit, vclock);
    sluice_store_free(store);
    sluice_vclock_free(vclock);
    return status;
}
