/*
 * limits.c - hit, peek and reset over several limits at once:
 *
 *   sluice hit|peek|reset KEY --limit ALGO:MAX/WINDOW[:BURST] [--limit ...]
 *                             [--cost C] [--json] [--store URL]
 *
 * e.g. --limit fixed:10/1s --limit sliding-log:1000/1h: the request is
 * admitted only if every limit admits it, and counted in every one or in
 * none (sluice_hit_all()). WINDOW is a duration as --window takes it
 * ("250ms", "1m30s", "1h", "1d", or plain milliseconds); BURST, for gcra,
 * as --burst takes it (1..MAX). --limit may be given
 * up to SLUICE_HIT_ALL_MAX times, and not together with --algo, --max or
 * --window. The first line of the output is the combined decision, as
 * 'sluice hit' prints it; a line per limit follows ("limit ALGO:MAX/WINDOWms
 * allowed remaining=..."; when the request was refused as a whole, nothing
 * was counted and a limit says "would-admit ... (not counted ...)" or
 * "refuses ..."), or with --json the object has a "limits" array of limits
 * (cli.h's shapes), each with its decision; "counted" says whether
 * anything was. reset says per limit whether it held a count.
 * Exit status as for 'sluice hit'.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* ---- Parsing --------------------------------------------------------------- */

/* Copies text[0..len) into 'buf' of 'cap' bytes; false if it does not fit. */
static bool part_copy(char *buf, size_t cap, const char *text, size_t len)
{
    if (len >= cap)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    return true;
}

/*
 * Parses "ALGO:MAX/WINDOW[:BURST]" into 'out'; 0, or reports and
 * CLI_EXIT_USAGE. The burst is for the algorithms that take one (gcra);
 * without it, the algorithm's default.
 */
static int limit_parse(sluice_limit *out, const char *cmd, const char *text)
{
    const char *colon = strchr(text, ':');
    const char *slash = colon != NULL ? strchr(colon, '/') : NULL;
    const char *bcolon = slash != NULL ? strchr(slash, ':') : NULL;
    const char *wend = bcolon != NULL ? bcolon : text + strlen(text);
    char algo[32], max[32], window[32], why[128];

    memset(out, 0, sizeof(*out));
    if (colon == NULL || slash == NULL ||
        !part_copy(algo, sizeof(algo), text, (size_t)(colon - text)) ||
        !part_copy(max, sizeof(max), colon + 1, (size_t)(slash - colon - 1)) ||
        !part_copy(window, sizeof(window), slash + 1,
                   (size_t)(wend - slash - 1)))
        return cli_usage_error(cmd, "--limit '%s': expected "
                               "ALGO:MAX/WINDOW[:BURST], e.g. fixed:10/1s",
                               text);
    if (sluice_algo_parse(&out->algo, algo) < 0)
        return cli_usage_error(cmd, "--limit '%s': unknown algorithm '%s' "
                               "(%s)", text, algo, cli_algo_list());
    if (!cli_parse_u64(&out->max, max, 1, SLUICE_MAX_MAX, why, sizeof(why)))
        return cli_usage_error(cmd, "--limit '%s': MAX %s", text, why);
    if (sluice_duration_parse(&out->window_ms, window) < 0)
        return cli_usage_error(cmd, "--limit '%s': WINDOW: %s", text,
                               sluice_last_error());
    if (bcolon != NULL &&
        !cli_parse_u64(&out->burst, bcolon + 1, 1, out->max, why,
                       sizeof(why)))
        return cli_usage_error(cmd, "--limit '%s': BURST %s", text, why);
    if (sluice_limit_check(out) < 0)
        return cli_usage_error(cmd, "--limit '%s': %s", text,
                               sluice_last_error());
    return 0;
}

/* Whether 'arg' is a --limit, and its value's place: in 'arg', or next. */
static bool is_limit(const char *arg, const char **value)
{
    if (strcmp(arg, "--limit") == 0) {
        *value = NULL;
        return true;
    }
    if (strncmp(arg, "--limit=", 8) == 0) {
        *value = arg + 8;
        return true;
    }
    return false;
}

bool cli_limits_given(int argc, char **argv)
{
    const char *value;

    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (is_limit(argv[i], &value))
            return true;
    return false;
}

/*
 * Takes every --limit out of 'argv' (up to a "--"), parsed into limits[],
 * and leaves the other arguments in order in 'rest' ('*nrest' of them).
 */
static int limits_take(sluice_limit *limits, size_t *n, char **rest,
                       int *nrest, const char *cmd, int argc, char **argv)
{
    bool after = false;
    int err;

    *n = 0;
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;

        after = after || strcmp(argv[i], "--") == 0;
        if (!after && (strncmp(argv[i], "--algo", 6) == 0 ||
                       strncmp(argv[i], "--max", 5) == 0 ||
                       strncmp(argv[i], "--window", 8) == 0))
            return cli_usage_error(cmd, "%s: not with --limit (a limit is "
                                   "--limit ALGO:MAX/WINDOW)", argv[i]);
        if (after || !is_limit(argv[i], &value)) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (value == NULL && (value = i + 1 < argc ? argv[++i] : NULL) == NULL)
            return cli_usage_error(cmd, "--limit: missing its value "
                                   "(ALGO:MAX/WINDOW, e.g. fixed:10/1s)");
        if (*n == SLUICE_HIT_ALL_MAX)
            return cli_usage_error(cmd, "--limit: at most %d limits",
                                   SLUICE_HIT_ALL_MAX);
        if ((err = limit_parse(&limits[*n], cmd, value)) != 0)
            return err;
        for (size_t j = 0; j < *n; j++)
            if (limits[j].algo == limits[*n].algo &&
                limits[j].window_ms == limits[*n].window_ms)
                return cli_usage_error(cmd, "--limit '%s': a second %s limit "
                                       "over the same window (each needs "
                                       "its own)", value,
                                       sluice_algo_name(limits[*n].algo));
        (*n)++;
    }
    return 0;
}

/* ---- Output ---------------------------------------------------------------- */

/* 'l' as "ALGO:MAX/WINDOWms", and ":BURST" when it has one. */
static void limit_text(char *buf, size_t cap, const sluice_limit *l)
{
    int len = snprintf(buf, cap, "%s:%llu/%llums", sluice_algo_name(l->algo),
                       (unsigned long long)l->max,
                       (unsigned long long)l->window_ms);

    if (l->burst != 0 && len > 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, ":%llu",
                 (unsigned long long)l->burst);
}

/* One decision's fields as text, as 'sluice hit' prints them. */
static void print_text(const sluice_decision *d)
{
    const char *fallback = cli_fallback_name(d);

    printf("%s remaining=%llu limit=%llu retry_after_ms=%llu "
           "reset_after_ms=%llu", d->allowed ? "allowed" : "denied",
           (unsigned long long)d->remaining, (unsigned long long)d->limit,
           (unsigned long long)d->retry_after_ms,
           (unsigned long long)d->reset_after_ms);
    if (fallback != NULL)
        printf(" fallback=%s", fallback);
}

/*
 * A limit's line of a request refused as a whole: nothing was counted in
 * any limit, so none may read "allowed" as if it had counted. Each says
 * what it would answer on its own, as 'sluice peek' on it would: remaining
 * is what would be left after this request (as peek says it).
 */
static void print_uncounted(const sluice_decision *d)
{
    if (d->allowed)
        printf("would-admit remaining=%llu limit=%llu retry_after_ms=0 "
               "reset_after_ms=%llu (not counted: the request was refused "
               "as a whole)", (unsigned long long)d->remaining,
               (unsigned long long)d->limit,
               (unsigned long long)d->reset_after_ms);
    else
        printf("refuses remaining=%llu limit=%llu retry_after_ms=%llu "
               "reset_after_ms=%llu", (unsigned long long)d->remaining,
               (unsigned long long)d->limit,
               (unsigned long long)d->retry_after_ms,
               (unsigned long long)d->reset_after_ms);
}

/* 'counted': the request was counted in every limit (an admitted hit). */
static void print_all(const cli_request *args, const sluice_limit *limits,
                      size_t n, const sluice_decision *d,
                      const sluice_decision *each, bool counted)
{
    if (args->json) {
        fputs("{\"key\":", stdout);
        cli_json_string(stdout, args->key, args->key_len);
        putchar(',');
        cli_json_decision(stdout, d, counted);
        fputs(",\"limits\":[", stdout);
    } else {
        print_text(d);
        putchar('\n');
    }
    for (size_t i = 0; i < n; i++) {
        char text[96];

        limit_text(text, sizeof(text), &limits[i]);
        if (args->json) {
            printf("%s{", i > 0 ? "," : "");
            cli_json_limit(stdout, &limits[i]);
            putchar(',');
            cli_json_decision(stdout, &each[i], counted);
            putchar('}');
            continue;
        }
        printf("limit %s ", text);
        if (d->allowed)
            print_text(&each[i]);
        else
            print_uncounted(&each[i]);
        putchar('\n');
    }
    if (args->json)
        fputs("]}\n", stdout);
}

/* ---- The commands ------------------------------------------------------------ */

/* Forgets every limit's count of args->key, saying what was there. */
static int reset_all(const char *cmd, sluice_store *store,
                     const cli_request *args, const sluice_limit *limits,
                     size_t n)
{
    int existed[SLUICE_HIT_ALL_MAX], any = 0, err = 0;
    sluice_decision d, each[SLUICE_HIT_ALL_MAX];

    /* What was there, by a peek of every limit just before the reset
       (sluice_reset_all() does not say; another process may count in
       between): on an empty key a peek of cost 1 admits and leaves the
       whole budget (max, or the burst) less 1, so one that answers "would
       refuse" or less holds a count. */
    if ((err = sluice_peek_all(&d, each, store, limits, n, args->key,
                               args->key_len, 1)) < 0 ||
        (err = sluice_reset_all(store, limits, n, args->key,
                                args->key_len)) < 0)
        return cli_lib_error(NULL, cmd, err);
    for (size_t i = 0; i < n; i++) {
        uint64_t whole = limits[i].burst ? limits[i].burst : limits[i].max;

        existed[i] = d.fallback != SLUICE_ANSWERED ? -1
                     : !each[i].allowed || each[i].remaining + 1 < whole;
        any = any < 0 || existed[i] < 0 ? -1 : any || existed[i];
    }
    if (args->json) {
        fputs("{\"key\":", stdout);
        cli_json_string(stdout, args->key, args->key_len);
        fputs(",\"limits\":[", stdout);
        for (size_t i = 0; i < n; i++) {
            printf("%s{", i > 0 ? "," : "");
            cli_json_limit(stdout, &limits[i]);
            printf(",\"existed\":%s}", cli_reset_json(existed[i]));
        }
        printf("],\"reset\":true,\"existed\":%s}\n", cli_reset_json(any));
        return CLI_EXIT_OK;
    }
    fputs("reset ", stdout);
    cli_put_safe(stdout, args->key, args->key_len, false);
    printf(": %s\n", cli_reset_words(any));
    for (size_t i = 0; i < n; i++) {
        char text[96];

        limit_text(text, sizeof(text), &limits[i]);
        printf("limit %s: %s\n", text, cli_reset_words(existed[i]));
    }
    return CLI_EXIT_OK;
}

/* Decides (kind 0 hit, 1 peek) or forgets (2 reset) with 'store'. */
static int decide(int kind, const char *cmd, sluice_store *store,
                  const cli_request *args, const sluice_limit *limits,
                  size_t n)
{
    sluice_decision d, each[SLUICE_HIT_ALL_MAX];
    int err;

    if (kind == 2)
        return reset_all(cmd, store, args, limits, n);
    if (kind == 0)
        err = sluice_hit_all(&d, each, store, limits, n, args->key,
                             args->key_len, args->cost);
    else
        err = sluice_peek_all(&d, each, store, limits, n, args->key,
                              args->key_len, args->cost);
    if (err < 0)
        return cli_lib_error(NULL, cmd, err);
    print_all(args, limits, n, &d, each,
              kind == 0 && d.allowed && d.fallback == SLUICE_ANSWERED);
    return d.allowed ? CLI_EXIT_OK : CLI_EXIT_REFUSED;
}

/* Every limit can admit the cost: else a usage error naming the limit. */
static int costs_fit(const char *cmd, uint64_t cost,
                     const sluice_limit *limits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const sluice_limit *l = &limits[i];
        bool over_burst = l->burst != 0 && cost > l->burst;
        char text[96];

        if (cost <= l->max && !over_burst)
            continue;
        limit_text(text, sizeof(text), l);
        return cli_usage_error(cmd, "--cost: %llu exceeds the %s of --limit "
                               "%s, so the request could never be admitted",
                               (unsigned long long)cost,
                               cost > l->max ? "max" : "burst", text);
    }
    return 0;
}

int cli_decide_all(int kind, const char *cmd, int argc, char **argv)
{
    unsigned takes = CLI_TAKES_KEY | CLI_TAKES_JSON | CLI_TAKES_STORE |
                     (kind == 2 ? 0 : CLI_TAKES_COST);
    sluice_limit limits[SLUICE_HIT_ALL_MAX];
    sluice_store *store = NULL;
    cli_request args;
    char **rest = malloc((size_t)(argc + 1) * sizeof(*rest));
    size_t n = 0;
    int nrest = 0, status;

    if (rest == NULL)
        return cli_lib_error(NULL, cmd, SLUICE_ENOMEM);
    status = limits_take(limits, &n, rest, &nrest, cmd, argc, argv);
    if (status == 0)
        status = cli_request_parse(&args, cmd, nrest, rest, takes);
    if (status == 0)
        status = costs_fit(cmd, args.cost, limits, n);
    if (status == 0) {
        args.limit = limits[0]; /* each is checked already */
        status = cli_request_require(&args, cmd, CLI_TAKES_KEY);
    }
    if (status == 0)
        status = cli_name_check(cmd, "KEY", args.key);
    if (status == 0)
        status = cli_store_open(&store, cmd, args.store, NULL, NULL);
    if (status == 0)
        status = decide(kind, cmd, store, &args, limits, n);
    sluice_store_free(store);
    free(rest);
    return status;
}
