/*
 * args.c - messages, strict numbers, the one option parser (and the options
 * of the commands that decide requests), and the monotonic clock. How bytes
 * are written (escaped, as JSON, as base64) is in text.c.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Messages -------------------------------------------------------------- */

/*
 * Writes "sluice: ", the message and a newline on stderr. The message may
 * quote what a user, a library or a server wrote, so it is written safe for
 * a terminal (cli_put_safe()): no control byte of it reaches the terminal.
 */
static void vreport(const char *fmt, va_list ap)
{
    char small[1024], *text = small;
    va_list again;
    int n;

    va_copy(again, ap);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n >= (int)sizeof(small) && (text = malloc((size_t)n + 1)) != NULL)
        vsnprintf(text, (size_t)n + 1, fmt, again);
    else if (text == NULL)
        text = small; /* out of memory: the message cut to fit */
    va_end(again);
    fflush(stdout);
    fputs("sluice: ", stderr);
    if (n > 0)
        cli_put_safe(stderr, text, strnlen(text, (size_t)n), false);
    fputc('\n', stderr);
    if (text != small)
        free(text);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    if (cmd != NULL)
        fprintf(stderr, "Try 'sluice %s --help' for more information.\n", cmd);
    else
        fputs("Try 'sluice --help' for more information.\n", stderr);
    return CLI_EXIT_USAGE;
}

const char *cli_shown(const char *text)
{
    static char bufs[4][CLI_SHOWN_MAX * 4 + 4];
    static unsigned next;
    char *buf = bufs[next++ % 4], *p = buf;
    size_t i;

    for (i = 0; text[i] != '\0' && i < CLI_SHOWN_MAX; i++) {
        unsigned char c = (unsigned char)text[i];

        if (c >= 0x20 && c < 0x7F)
            *p++ = (char)c;
        else
            p += sprintf(p, "\\x%02x", c);
    }
    if (text[i] != '\0')
        p += sprintf(p, "...");
    *p = '\0';
    return buf;
}

bool cli_is_plain(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0';
         p++)
        if (*p < 0x20 || *p >= 0x7F)
            return false;
    return true;
}

/* ---- Numbers --------------------------------------------------------------- */

bool cli_parse_u64(uint64_t *out, const char *text, uint64_t lo, uint64_t hi,
                   char *why, size_t why_len)
{
    uint64_t n = 0;
    bool overflow = false;
    const char *p;

    if (text[0] == '\0') {
        snprintf(why, why_len, "an empty value is not a number (expected "
                 "%llu..%llu)", (unsigned long long)lo, (unsigned long long)hi);
        return false;
    }
    for (p = text; *p != '\0'; p++)
        if (*p < '0' || *p > '9')
            break;
    if (*p != '\0') {
        if (text[0] == '-' && text[1] >= '0' && text[1] <= '9')
            snprintf(why, why_len, "'%s' is negative (expected %llu..%llu)",
                     cli_shown(text), (unsigned long long)lo,
                     (unsigned long long)hi);
        else if (text[0] == '+')
            snprintf(why, why_len, "'%s' has a sign (expected plain digits, "
                     "%llu..%llu)", cli_shown(text), (unsigned long long)lo,
                     (unsigned long long)hi);
        else
            snprintf(why, why_len, "'%s' is not a whole number (expected "
                     "%llu..%llu)", cli_shown(text), (unsigned long long)lo,
                     (unsigned long long)hi);
        return false;
    }
    /* Checked before each step, so 'n' never wraps. */
    for (p = text; *p != '\0' && !overflow; p++) {
        uint64_t digit = (uint64_t)(*p - '0');

        if (n > (UINT64_MAX - digit) / 10)
            overflow = true;
        else
            n = n * 10 + digit;
    }
    if (overflow || n < lo || n > hi) {
        snprintf(why, why_len, "'%s' is out of range %llu..%llu",
                 cli_shown(text), (unsigned long long)lo,
                 (unsigned long long)hi);
        return false;
    }
    *out = n;
    return true;
}

bool cli_cost_fits(uint64_t cost, const sluice_limit *limit, char *why,
                   size_t why_len)
{
    bool burst = limit->burst != 0 && limit->burst < limit->max;

    if (cost <= (burst ? limit->burst : limit->max))
        return true;
    snprintf(why, why_len, "%llu exceeds --%s %llu, so the request could "
             "never be admitted", (unsigned long long)cost,
             burst ? "burst" : "max",
             (unsigned long long)(burst ? limit->burst : limit->max));
    return false;
}

/* ---- Options --------------------------------------------------------------- */

int cli_opt_u64(uint64_t *out, const char *cmd, const char *what,
                const char *text, uint64_t lo, uint64_t hi)
{
    char why[256];

    if (!cli_parse_u64(out, text, lo, hi, why, sizeof(why)))
        return cli_usage_error(cmd, "%s: %s", what, why);
    return 0;
}

/*
 * True for a zero duration: a duration whose every number is zero ("0",
 * "00", "0ms", "0s", "0m0s"...). It is told by the library: with each run
 * of zeros made "1", the text must be a duration sluice_duration_parse()
 * takes, so the forms are the library's.
 */
static bool is_zero_duration(const char *text)
{
    char ones[64];
    size_t n = 0;
    uint64_t ms;

    if (strpbrk(text, "123456789") != NULL || strchr(text, '0') == NULL)
        return false;
    for (const char *p = text; *p != '\0'; p++) {
        if (n + 2 >= sizeof(ones))
            return false;
        if (*p != '0')
            ones[n++] = *p;
        else if (p == text || p[-1] != '0')
            ones[n++] = '1';
    }
    ones[n] = '\0';
    return sluice_duration_parse(&ms, ones) == 0;
}

/*
 * Checks 'text', the value of option 'what' of command 'cmd', as a duration
 * (sluice_duration_parse()); with 'zero_ok', a zero duration is accepted too
 * and means 0. Returns 0, or reports and returns CLI_EXIT_USAGE.
 */
static int check_duration(uint64_t *out, const char *cmd, const char *what,
                          const char *text, bool zero_ok)
{
    int err;

    if (zero_ok && is_zero_duration(text)) {
        *out = 0;
        return 0;
    }
    err = sluice_duration_parse(out, text);
    /* The library quotes the text as it is; junk is quoted here. */
    if (err < 0 && !cli_is_plain(text))
        return cli_usage_error(cmd, "%s: invalid duration '%s' (expected "
                               "a number of milliseconds, or whole numbers "
                               "with units in descending order, each at "
                               "most once: d, h, m, s, ms (e.g. 250ms, 1s, "
                               "1m30s, 1h30m, 2s500ms, 1d))", what, cli_shown(text));
    if (err < 0)
        return cli_usage_error(cmd, "%s: %s", what, sluice_last_error());
    return 0;
}

/*
 * Checks the value of the given option 'opt' of command 'cmd' by its type
 * and stores it into its 'out'. Returns 0, or reports and returns
 * CLI_EXIT_USAGE.
 */
static int opt_check(const char *cmd, const cli_opt *opt)
{
    switch (opt->type) {
    case CLI_VALUE_FLAG:
        *(bool *)opt->out = true;
        return 0;
    case CLI_VALUE_TEXT:
        *(const char **)opt->out = opt->value;
        return 0;
    case CLI_VALUE_NUMBER:
        return cli_opt_u64(opt->out, cmd, opt->name, opt->value, opt->lo,
                           opt->hi);
    case CLI_VALUE_DURATION:
    case CLI_VALUE_DURATION_0:
        return check_duration(opt->out, cmd, opt->name, opt->value,
                              opt->type == CLI_VALUE_DURATION_0);
    case CLI_VALUE_ALGO:
        if (sluice_algo_parse(opt->out, opt->value) < 0)
            return cli_usage_error(cmd, "%s: unknown algorithm '%s' "
                                   "(expected %s)", opt->name,
                                   cli_shown(opt->value), cli_algo_list());
        return 0;
    }
    return 0;
}

/*
 * Finds the option named by 'arg' ("--name" or "--name=value"); sets
 * '*value' to what follows '=' or to NULL. Returns NULL for an unknown name.
 */
static cli_opt *opt_find(cli_opt *opts, size_t nopts, const char *arg,
                         const char **value)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);

    for (size_t i = 0; i < nopts; i++) {
        if (strlen(opts[i].name) == len &&
            memcmp(opts[i].name, arg, len) == 0) {
            *value = eq != NULL ? eq + 1 : NULL;
            return &opts[i];
        }
    }
    return NULL;
}

/*
 * Stores operand 'arg' of command 'cmd' into 'pos'; 0 or CLI_EXIT_USAGE.
 * 'after_dashes': 'arg' came after "--", so an option there is an operand.
 */
static int pos_add(cli_pos *pos, const char *cmd, const char *arg,
                   bool after_dashes)
{
    if (pos->n < pos->max) {
        pos->args[pos->n++] = arg;
        return 0;
    }
    if (after_dashes && arg[0] == '-')
        return cli_usage_error(cmd, "%s: unexpected argument '%s' after "
                               "'--' (everything after '--' is an operand; "
                               "put options before '--')", cmd,
                               cli_shown(arg));
    if (pos->max == 0)
        return cli_usage_error(cmd, "%s: unexpected argument '%s'", cmd,
                               cli_shown(arg));
    if (pos->is_key)
        return cli_usage_error(cmd, "%s: unexpected argument '%s' (KEY is "
                               "already '%s'; a key is one argument)", cmd,
                               cli_shown(arg), cli_shown(pos->args[0]));
    return cli_usage_error(cmd, "%s: unexpected argument '%s' (expected %s)",
                           cmd, cli_shown(arg), pos->what);
}

int cli_opts_parse(const char *cmd, int argc, char **argv, cli_opt *opts,
                   size_t nopts, cli_pos *pos, cli_when when)
{
    bool options_done = false;
    int err;

    pos->n = 0;
    for (size_t i = 0; i < nopts; i++)
        opts[i].value = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *value;
        cli_opt *opt;

        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            if ((err = pos_add(pos, cmd, arg, options_done)) != 0)
                return err;
            continue;
        }
        if ((opt = opt_find(opts, nopts, arg, &value)) == NULL)
            return cli_usage_error(cmd, "%s: unknown option '%s'", cmd,
                                   cli_shown(arg));
        if (opt->value != NULL)
            return cli_usage_error(cmd, "%s is given twice", opt->name);
        if (opt->type != CLI_VALUE_FLAG && value == NULL) {
            if (i + 1 >= argc)
                return cli_usage_error(cmd, "%s needs a value", opt->name);
            value = argv[++i];
        } else if (opt->type == CLI_VALUE_FLAG && value != NULL) {
            return cli_usage_error(cmd, "%s takes no value (got '%s')",
                                   opt->name, cli_shown(arg));
        }
        opt->value = value != NULL ? value : "";
        if (when == CLI_CHECK_AT_ONCE && (err = opt_check(cmd, opt)) != 0)
            return err;
    }
    return 0;
}

int cli_opts_check(const char *cmd, const cli_opt *opts, size_t nopts)
{
    int err;

    for (size_t i = 0; i < nopts; i++)
        if (opts[i].value != NULL && (err = opt_check(cmd, &opts[i])) != 0)
            return err;
    return 0;
}

const char *cli_opt_value(const cli_opt *opts, size_t nopts, const char *name)
{
    for (size_t i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return opts[i].value;
    return NULL;
}

int cli_name_check(const char *cmd, const char *what, const char *name)
{
    if (name[0] != '\0')
        return 0;
    return cli_usage_error(cmd, "%s: %s is empty (a name needs at least one "
                           "byte)", cmd, what);
}

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

/* ---- Requests -------------------------------------------------------------- */

int cli_request_parse(cli_request *out, const char *cmd, int argc,
                      char **argv, unsigned takes)
{
    /* Entry i is the option of bit 1 << i (CLI_TAKES_*). */
    const cli_opt all[] = {
        CLI_OPT_ALGO("--algo", &out->limit.algo),
        CLI_OPT_NUMBER("--max", &out->limit.max, 1, SLUICE_MAX_MAX),
        CLI_OPT_DURATION("--window", &out->limit.window_ms),
        CLI_OPT_NUMBER("--cost", &out->cost, 1, SLUICE_MAX_MAX),
        CLI_OPT_FLAG("--json", &out->json),
        CLI_OPT_TEXT("--store", &out->store),
        CLI_OPT_NUMBER("--burst", &out->limit.burst, 1, SLUICE_MAX_MAX),
    };
    enum { NALL = sizeof(all) / sizeof(all[0]) };
    const char *store_file = NULL;
    cli_opt opts[NALL + 1];
    cli_pos pos = {.args = &out->key,
                   .max = (takes & CLI_TAKES_KEY) ? 1 : 0,
                   .is_key = true};
    size_t n = 0;
    int err;

    memset(out, 0, sizeof(*out));
    out->limit.algo = SLUICE_FIXED;
    out->cost = 1;
    for (size_t i = 0; i < NALL; i++)
        if (takes & (1u << i))
            opts[n++] = all[i];
    /* --store-file goes with --store, after the options of the bits. */
    if (takes & CLI_TAKES_STORE)
        opts[n++] = (cli_opt)CLI_OPT_TEXT("--store-file", &store_file);
    err = cli_opts_parse(cmd, argc, argv, opts, n, &pos, CLI_CHECK_AT_ONCE);
    if (err != 0)
        return err;
    n = 0;
    for (size_t i = 0; i < NALL; i++)
        if ((takes & (1u << i)) && opts[n++].value != NULL)
            out->given |= 1u << i;
    if (pos.n == 1) {
        out->key_len = strlen(out->key);
        out->given |= CLI_TAKES_KEY;
    }
    if (takes & CLI_TAKES_STORE)
        return cli_store_url(&out->store, cmd, store_file);
    return 0;
}

int cli_request_require(const cli_request *r, const char *cmd,
                        unsigned needed)
{
    static const struct {
        unsigned bit;
        const char *name, *hint; /* hint NULL: the algorithms' names */
    } required[] = {
        {CLI_TAKES_KEY, "KEY", "the name whose budget is counted"},
        {CLI_TAKES_ALGO, "--algo", NULL},
        {CLI_TAKES_MAX, "--max", "units admitted per window, e.g. --max 10"},
        {CLI_TAKES_WINDOW, "--window", "the window's length, e.g. --window 1s"},
    };
    char why[128];

    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if ((needed & required[i].bit) && !(r->given & required[i].bit))
            return cli_usage_error(cmd, "%s: missing %s (%s)", cmd,
                                   required[i].name,
                                   required[i].hint != NULL
                                       ? required[i].hint
                                       : cli_algo_list());
    /* The limit first: a burst above max is the burst's fault. */
    if (sluice_limit_check(&r->limit) < 0)
        return cli_usage_error(cmd, "%s: %s",
                               r->limit.burst != 0 &&
                                       strstr(sluice_last_error(), "burst")
                                   ? "--burst"
                                   : "--max and --window",
                               sluice_last_error());
    if ((r->given & CLI_TAKES_COST) &&
        !cli_cost_fits(r->cost, &r->limit, why, sizeof(why)))
        return cli_usage_error(cmd, "--cost: %s", why);
    return 0;
}

/* ---- Time ------------------------------------------------------------------ */

uint64_t cli_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
