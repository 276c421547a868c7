/*
 * demo.c - 'sluice demo': the trade-off of the algorithms on one screen.
 *
 * Two traffic patterns are replayed against each algorithm, on the embedded
 * store with a virtual clock, for a budget of DEMO_MAX per DEMO_WINDOW_MS:
 *
 *   boundary attack  one request at t=0 opens a window (the fixed window's
 *                    starts at its first request; the sliding counter's are
 *                    aligned to 0, so t=999/1000 is the seam for all three),
 *                    then max requests at t=999 and max more at t=1000;
 *   steady traffic   STEADY_SENT requests 30..70 ms apart (50 on average,
 *                    twice the budget), the gaps drawn from a fixed seed.
 *
 * Every figure printed comes from the library's decisions or its store
 * statistics; nothing is written in by hand but the traffic.
 *
 * 'sluice demo chat' (the job queue on a server) is in demo_chat.c.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cli_demo_help[] =
    "Usage: sluice demo\n"
    "       sluice demo chat --store URL | --store-file PATH\n"
    "\n"
    "Shows, on one screen, how the @ALGO_COUNT@ algorithms trade memory "
    "against\n"
    "exactness, for a budget of max=10 requests per window=1s. Runs on the\n"
    "embedded store with a virtual clock: no server, no waiting, and every\n"
    "figure is computed from the library's real decisions.\n"
    "\n"
    "Each algorithm meets two kinds of traffic:\n"
    "  boundary attack  1 request at t=0 opens the window, then max requests\n"
    "                   in its last millisecond (t=999) and max more in the\n"
    "                   first of the next window (t=1000);\n"
    "  steady traffic   100 requests 30-70 ms apart (fixed seed), about twice\n"
    "                   the budget.\n"
    "\n"
    "The table shows, per algorithm: how many of the 2 x max seam requests\n"
    "were admitted; the most requests admitted in any span one window long\n"
    "(a sliding scan over the admitted times); the bytes the embedded store\n"
    "holds for one key whose budget is used up, measured with\n"
    "sluice_store_stats_get() at max=10 and max=1000; and the steady traffic\n"
    "admitted. Below it: the attack instant by instant, a timeline of the\n"
    "steady run (one column per 100 ms; '+' rows count admitted requests,\n"
    "'-' rows refused ones) and what it all means.\n"
    "\n"
    "Colors are used only when stdout is a terminal and NO_COLOR is unset.\n"
    "\n"
    "'sluice demo chat --store valkey://HOST[:PORT]' (or 'demo --chat') runs\n"
    "the job queue for real, on that server, for about 5 s: the chat game of\n"
    "the design notes. 20 chats, each its own queue capped at 20 jobs per\n"
    "second; chat 1 floods 2000 messages at once, the 19 others send 10\n"
    "each, one per 400 ms. 3 worker processes (forked, each a sluice worker\n"
    "over all 20 queues) do the jobs, 2 ms of work each. Per chat it prints\n"
    "the jobs sent, done and left, the throughput, and the wait from add to\n"
    "take (median and 99th percentile; the add time rides in the payload):\n"
    "the flooding chat is held to about its cap, 20 jobs/s, while every\n"
    "quiet message is taken within milliseconds. The queues live under a\n"
    "fresh emq_prefix (sluice-demo-PID-MS, appended to the URL); afterwards\n"
    "their leftover jobs are taken and completed, so only each queue's small\n"
    "meta hash and the prefix's queue registry remain on the server.\n"
    "Instead of --store: --store-file PATH (the URL on the file's first\n"
    "line; mode 600), or the environment variable SLUICE_STORE.\n"
    "\n"
    "Exit status: 0 shown, 2 usage error (demo chat: no --store, or the\n"
    "embedded store), 3 library or store error.\n";

/* ---- The scenarios --------------------------------------------------------- */

#define DEMO_MAX 10u
#define DEMO_WINDOW_MS 1000u
#define DEMO_KEY "client"
#define STEADY_SENT 100u
#define STEADY_SEED 42u
#define STEADY_GAP_MIN_MS 30u
#define STEADY_GAP_SPREAD_MS 41u /* gaps of 30..70 ms */
#define BUCKET_MS 100u           /* one column of the timeline */
#define BIG_MAX 1000u            /* the second size memory is measured at */
#define ATTACK_SENT (1u + 2u * DEMO_MAX)
#define TRACE_MAX STEADY_SENT
#define DEMO_COLUMNS 80u /* the widest line: an 80-column terminal */
#define MEANING_INDENT 16u /* where the words after an algorithm's name start */
#define MEANING_MAX 1024u /* the longest words of an algorithm, figures in */

_Static_assert(ATTACK_SENT <= TRACE_MAX, "the attack fits a trace");
_Static_assert(DEMO_WINDOW_MS == 1000, "the text calls the window 1 s");
_Static_assert(BIG_MAX <= DEMO_WINDOW_MS, "memory is measured in one window");

typedef struct trace {
    uint64_t t[TRACE_MAX]; /* request times in ms, non-decreasing */
    size_t n;
} trace;

/* One request at 0, then max at the window's last ms and max at the next's. */
static void attack_trace(trace *tr)
{
    tr->n = 0;
    tr->t[tr->n++] = 0;
    for (unsigned i = 0; i < DEMO_MAX; i++)
        tr->t[tr->n++] = DEMO_WINDOW_MS - 1;
    for (unsigned i = 0; i < DEMO_MAX; i++)
        tr->t[tr->n++] = DEMO_WINDOW_MS;
}

/* xorshift32: the same gaps on every machine, from STEADY_SEED. */
static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

static void steady_trace(trace *tr)
{
    uint32_t seed = STEADY_SEED;
    uint64_t t = 0;

    for (tr->n = 0; tr->n < STEADY_SENT; tr->n++) {
        tr->t[tr->n] = t;
        t += STEADY_GAP_MIN_MS + next_random(&seed) % STEADY_GAP_SPREAD_MS;
    }
}

/* ---- Playing them ---------------------------------------------------------- */

/* What one algorithm made of one trace. */
typedef struct outcome {
    bool allowed[TRACE_MAX];
    size_t admitted;
    size_t peak; /* the most admitted in any span DEMO_WINDOW_MS long */
} outcome;

/*
 * The most admitted requests in any span of 'window_ms' milliseconds: a
 * sliding scan over the admitted times, which are in order.
 */
static size_t peak_in_span(const trace *tr, const bool *allowed,
                           uint64_t window_ms)
{
    uint64_t at[TRACE_MAX];
    size_t n = 0, first = 0, peak = 0;

    for (size_t i = 0; i < tr->n; i++)
        if (allowed[i])
            at[n++] = tr->t[i];
    for (size_t last = 0; last < n; last++) {
        while (at[last] - at[first] >= window_ms)
            first++;
        if (last - first + 1 > peak)
            peak = last - first + 1;
    }
    return peak;
}

/* Opens an embedded store whose clock is the new virtual clock '*vclock'. */
static int open_store(sluice_store **store, sluice_vclock **vclock)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    int err;

    *store = NULL;
    if ((err = sluice_vclock_new(vclock, 0)) < 0)
        return err;
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = *vclock;
    if ((err = sluice_store_open(store, "mem://", &opts)) < 0) {
        sluice_vclock_free(*vclock);
        *vclock = NULL;
    }
    return err;
}

/* Replays 'tr' against a fresh store, one unit per request, into 'out'. */
static int play(outcome *out, const sluice_limit *limit, const trace *tr)
{
    sluice_store *store;
    sluice_vclock *vclock;
    sluice_decision d;
    int err;

    memset(out, 0, sizeof(*out));
    if ((err = open_store(&store, &vclock)) < 0)
        return err;
    for (size_t i = 0; i < tr->n; i++) {
        sluice_vclock_set(vclock, tr->t[i]);
        err = sluice_hit(&d, store, limit, DEMO_KEY, strlen(DEMO_KEY), 1);
        if (err < 0)
            break;
        out->allowed[i] = d.allowed != 0;
        out->admitted += d.allowed != 0;
    }
    sluice_store_free(store);
    sluice_vclock_free(vclock);
    out->peak = peak_in_span(tr, out->allowed, limit->window_ms);
    return err;
}

/*
 * The bytes the embedded store holds for one key whose budget of 'max' is
 * used up, one request per millisecond: its statistics with the key, less
 * its statistics without. The requests are admitted by every algorithm
 * (max <= window), and this is checked.
 */
static int key_bytes(uint64_t *out, sluice_algo algo, uint64_t max)
{
    sluice_limit limit = SLUICE_LIMIT(algo, max, DEMO_WINDOW_MS);
    sluice_store_stats before, after;
    sluice_store *store;
    sluice_vclock *vclock;
    sluice_decision d;
    int err;

    if ((err = open_store(&store, &vclock)) < 0)
        return err;
    err = sluice_store_stats_get(&before, store);
    for (uint64_t t = 0; err == 0 && t < max; t++) {
        sluice_vclock_set(vclock, t);
        err = sluice_hit(&d, store, &limit, DEMO_KEY, strlen(DEMO_KEY), 1);
        if (err == 0 && !d.allowed) {
            cli_error("demo: %s refused request %llu of %llu within one "
                      "window", sluice_algo_name(algo),
                      (unsigned long long)t + 1, (unsigned long long)max);
            err = SLUICE_EINVAL;
        }
    }
    if (err == 0)
        err = sluice_store_stats_get(&after, store);
    if (err == 0)
        *out = after.bytes - before.bytes;
    sluice_store_free(store);
    sluice_vclock_free(vclock);
    return err;
}

/* ---- Printing -------------------------------------------------------------- */

typedef struct palette {
    const char *bold, *green, *red, *dim, *off;
} palette;

/* Colors only on a terminal, and never when NO_COLOR is set. */
static palette palette_pick(void)
{
    const char *term = getenv("TERM");
    palette p = {"", "", "", "", ""};

    if (isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL &&
        (term == NULL || strcmp(term, "dumb") != 0)) {
        p.bold = "\033[1m";
        p.green = "\033[32m";
        p.red = "\033[31m";
        p.dim = "\033[2m";
        p.off = "\033[0m";
    }
    return p;
}

/* Everything measured for one algorithm. */
typedef struct report {
    sluice_algo algo;
    outcome attack, steady;
    uint64_t bytes_small, bytes_big; /* one used-up key at DEMO_MAX, BIG_MAX */
} report;

/*
 * A peak, in red with a "> max" mark when it is over the budget, padded to
 * 'width' columns unless 'last' (no trailing spaces at the end of a line).
 */
static void print_peak(const palette *p, size_t peak, int width, bool last)
{
    char cell[32];
    int len = snprintf(cell, sizeof(cell), "%zu%s", peak,
                       peak > DEMO_MAX ? " > max" : "");

    printf("%s%s%s", peak > DEMO_MAX ? p->red : "", cell,
           peak > DEMO_MAX ? p->off : "");
    if (!last && len < width)
        printf("%*s", width - len, "");
}

/* ---- Each algorithm's words ------------------------------------------------ */

/*
 * What the demo says of each algorithm comes from its own folder,
 * src/algo/FOLDER/demo.txt (cli_demo_texts[], written by cli/CMakeLists.txt):
 * its first line names what one used-up key holds, for the sentence under
 * the table; the lines after it say what its figures mean, under its name at
 * the end. In them a {name} stands for a figure of its report:
 *   {attack_peak}     the most admitted in any 1 s span of the attack;
 *   {peak}            the same over the attack and the steady run;
 *   {last_admitted}, {last_sent}, {last_t}
 *                     the attack at the window's last ms (t=999);
 *   {next_admitted}, {next_sent}, {next_t}
 *                     the attack at the next window's first (t=1000);
 *   {bytes_small}, {bytes_big}, {big_max}
 *                     one used-up key's bytes at max=10 and at max=1000;
 *   {bucket_bound}    the most a bucket of max, refilled at max per window,
 *                     admits in a span one window long:
 *                     max + floor((window - 1) x max / window).
 * A name it does not know is printed as written.
 */

/* The words of what one used-up key of 'algo' holds, and their length. */
static const char *memory_words(sluice_algo algo, size_t *len)
{
    const char *text = cli_demo_texts[algo];
    const char *nl = strchr(text, '\n');

    *len = nl != NULL ? (size_t)(nl - text) : strlen(text);
    return text;
}

/*
 * Prints the 'len' bytes of words 'w', each after a space, or after a line
 * break and 'indent' spaces where it would pass column DEMO_COLUMNS; '*col'
 * is the column.
 */
static void print_wrapped(const char *w, size_t len, size_t *col,
                          size_t indent)
{
    size_t i = 0;

    while (i < len) {
        size_t start = i;

        while (i < len && w[i] != ' ')
            i++;
        if (i > start) {
            if (*col > indent && *col + 1 + (i - start) > DEMO_COLUMNS) {
                printf("\n%*s", (int)indent, "");
                *col = indent;
            } else if (*col > indent) {
                printf(" ");
                (*col)++;
            }
            printf("%.*s", (int)(i - start), &w[start]);
            *col += i - start;
        }
        while (i < len && w[i] == ' ')
            i++;
    }
}

/* The sentence under the table: what one used-up key holds, per algorithm. */
static void print_memory_words(const palette *p, const report *r, unsigned n)
{
    static const char lead[] = "Memory is measured: the bytes the embedded "
                               "store holds for a used-up key, key included:";
    size_t col = 0;

    printf("%s", p->dim);
    print_wrapped(lead, strlen(lead), &col, 0);
    for (unsigned a = 0; a < n; a++) {
        char named[64];
        size_t len;
        const char *words = memory_words(r[a].algo, &len);
        int k;

        print_wrapped(words, len, &col, 0);
        k = snprintf(named, sizeof(named), "(%s)%s",
                     sluice_algo_name(r[a].algo),
                     a + 1 == n ? "." : a + 2 == n ? (n > 2 ? ", or" : " or")
                                                   : ",");
        print_wrapped(named, k > 0 ? (size_t)k : 0, &col, 0);
    }
    printf("%s\n", p->off);
}

/*
 * The table: per algorithm (the 'n' reports 'r'), the seam requests of the
 * attack admitted (all but the opener at index 0, of 'attack_seam'), the
 * peaks, the memory and the steady traffic admitted. Its columns are set so
 * that its widest line, the second heading, is DEMO_COLUMNS wide.
 */
static void print_table(const palette *p, const report *r, unsigned n,
                        size_t attack_seam)
{
    char small[16], big[16];

    snprintf(small, sizeof(small), "max=%u", DEMO_MAX);
    snprintf(big, sizeof(big), "max=%u", BIG_MAX);
    printf("%s%-15s %-21s%-20s%s%s\n", p->bold, "", "boundary attack",
           "memory per key", "steady traffic", p->off);
    printf("%s%-15s %-9s %-11s%7s  %9s  %-11s %s%s\n", p->bold,
           "algorithm", "admitted", "peak in 1 s", small, big, "admitted",
           "peak in 1 s", p->off);
    for (unsigned a = 0; a < n; a++) {
        printf("%-15s %2zu of %-3zu ", sluice_algo_name(r[a].algo),
               r[a].attack.admitted - r[a].attack.allowed[0], attack_seam);
        print_peak(p, r[a].attack.peak, 11, false);
        printf("%5llu B  %7llu B  %3zu of %-3u  ",
               (unsigned long long)r[a].bytes_small,
               (unsigned long long)r[a].bytes_big, r[a].steady.admitted,
               STEADY_SENT);
        print_peak(p, r[a].steady.peak, 0, true);
        printf("\n");
    }
    print_memory_words(p, r, n);
}

/*
 * The attack instant by instant, per algorithm (the 'n' reports 'r'):
 * admitted/sent at each distinct time of 'tr'.
 */
static void print_seam(const palette *p, const report *r, unsigned n,
                       const trace *tr)
{
    printf("%s%-17s", p->bold, "the attack at");
    for (size_t i = 0; i < tr->n; i++)
        if (i == 0 || tr->t[i] != tr->t[i - 1])
            printf("  t=%-6llu", (unsigned long long)tr->t[i]);
    printf("   (admitted/sent)%s\n", p->off);
    for (unsigned a = 0; a < n; a++) {
        printf("%-17s", sluice_algo_name(r[a].algo));
        for (size_t i = 0; i < tr->n;) {
            size_t sent = 0, ok = 0;
            char cell[32];

            for (uint64_t t = tr->t[i]; i < tr->n && tr->t[i] == t; i++) {
                sent++;
                ok += r[a].attack.allowed[i];
            }
            snprintf(cell, sizeof(cell), "%zu/%zu", ok, sent);
            printf("  %s%-*s%s", ok == sent ? p->green : p->red,
                   i < tr->n ? 8 : 0, cell, p->off);
        }
        printf("\n");
    }
}

/* One timeline row: per bucket, how many requests were (not) 'admitted'. */
static void print_row(const char *label, const char *sign, const char *color,
                      const palette *p, const trace *tr, const bool *allowed,
                      bool admitted, size_t columns)
{
    size_t i = 0;

    printf("%-15s %s ", label, sign);
    for (size_t c = 0; c < columns; c++) {
        unsigned n = 0;

        for (; i < tr->n && tr->t[i] / BUCKET_MS == c; i++)
            n += allowed[i] == admitted;
        if (n == 0)
            printf("%s.%s", p->dim, p->off);
        else
            printf("%s%c%s", color, n > 9 ? '*' : (char)('0' + n), p->off);
    }
    printf("\n");
}

/* The steady run 'tr' per algorithm (the 'n' reports 'r'), in buckets. */
static void print_timeline(const palette *p, const report *r, unsigned n,
                           const trace *tr)
{
    size_t columns = (size_t)(tr->t[tr->n - 1] / BUCKET_MS) + 1;
    size_t per_window = DEMO_WINDOW_MS / BUCKET_MS;
    char axis[160];

    printf("%ssteady traffic, one column per %u ms: + admitted, - refused%s\n",
           p->bold, BUCKET_MS, p->off);
    memset(axis, ' ', sizeof(axis));
    for (size_t c = 0; c <= columns && c + 4 < sizeof(axis); c += per_window) {
        char tick[16];
        int len = snprintf(tick, sizeof(tick), "%zus", c / per_window);

        memcpy(&axis[c], tick, (size_t)len);
    }
    axis[columns + 3 < sizeof(axis) ? columns + 3 : sizeof(axis) - 1] = '\0';
    for (size_t end = strlen(axis); end > 0 && axis[end - 1] == ' '; end--)
        axis[end - 1] = '\0';
    printf("%-17s %s\n", "", axis);
    for (unsigned a = 0; a < n; a++) {
        print_row(sluice_algo_name(r[a].algo), "+", p->green, p, tr,
                  r[a].steady.allowed, true, columns);
        print_row("", "-", p->red, p, tr, r[a].steady.allowed, false, columns);
    }
}

/* How many requests at time 't' of 'tr' 'o' admitted, and how many came. */
static size_t admitted_at(const outcome *o, const trace *tr, uint64_t t,
                          size_t *sent)
{
    size_t ok = 0;

    *sent = 0;
    for (size_t i = 0; i < tr->n; i++) {
        if (tr->t[i] == t) {
            (*sent)++;
            ok += o->allowed[i];
        }
    }
    return ok;
}

/* A figure of a report, by the name its words give it ({name}). */
typedef struct figure {
    const char *name;
    unsigned long long value;
} figure;

#define FIGURES_MAX 12

/* The figures of report 'r' (see above), into 'f'; returns how many. */
static size_t report_figures(figure *f, const report *r, const trace *attack)
{
    size_t last_sent, next_sent, n = 0;
    size_t last = admitted_at(&r->attack, attack, DEMO_WINDOW_MS - 1,
                              &last_sent);
    size_t next = admitted_at(&r->attack, attack, DEMO_WINDOW_MS, &next_sent);
    size_t peak = r->attack.peak > r->steady.peak ? r->attack.peak
                                                  : r->steady.peak;

    f[n++] = (figure){"attack_peak", r->attack.peak};
    f[n++] = (figure){"peak", peak};
    f[n++] = (figure){"last_admitted", last};
    f[n++] = (figure){"last_sent", last_sent};
    f[n++] = (figure){"last_t", DEMO_WINDOW_MS - 1};
    f[n++] = (figure){"next_admitted", next};
    f[n++] = (figure){"next_sent", next_sent};
    f[n++] = (figure){"next_t", DEMO_WINDOW_MS};
    f[n++] = (figure){"bytes_small", r->bytes_small};
    f[n++] = (figure){"bytes_big", r->bytes_big};
    f[n++] = (figure){"big_max", BIG_MAX};
    f[n++] = (figure){"bucket_bound", DEMO_MAX + (DEMO_WINDOW_MS - 1) *
                                                     DEMO_MAX / DEMO_WINDOW_MS};
    return n;
}

/*
 * Writes 'text' into 'out' ('cap' bytes) with each {name} of 'f' as its
 * figure and each line break as a space, so that the words are wrapped
 * where the screen needs, not where demo.txt breaks them. Returns the
 * length written (the words are cut should they not fit).
 */
static size_t expand_words(char *out, size_t cap, const char *text,
                           const figure *f, size_t nf)
{
    size_t n = 0, len = strlen(text);

    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        const char *end = text[i] == '{' ? memchr(&text[i], '}', len - i)
                                         : NULL;
        size_t k = 0, name_len = end != NULL ? (size_t)(end - &text[i]) - 1
                                             : 0;

        while (end != NULL && k < nf &&
               (strlen(f[k].name) != name_len ||
                memcmp(f[k].name, &text[i + 1], name_len) != 0))
            k++;
        if (end != NULL && k < nf) {
            int w = snprintf(&out[n], cap - n, "%llu", f[k].value);

            n += w > 0 && (size_t)w < cap - n ? (size_t)w : 0;
            i += name_len + 1;
        } else {
            out[n++] = text[i] == '\n' ? ' ' : text[i];
        }
    }
    out[n] = '\0';
    return n;
}

/*
 * What the figures mean: per report of 'r' ('n'), its name, then its words
 * (all of demo.txt after the first line), figures in, wrapped under them.
 */
static void print_meaning(const palette *p, const report *r, unsigned n,
                          const trace *attack)
{
    for (unsigned a = 0; a < n; a++) {
        figure f[FIGURES_MAX];
        char words[MEANING_MAX];
        size_t nf = report_figures(f, &r[a], attack);
        const char *text = strchr(cli_demo_texts[r[a].algo], '\n');
        size_t col = MEANING_INDENT;

        printf("%s%-*s%s", p->bold, (int)MEANING_INDENT,
               sluice_algo_name(r[a].algo), p->off);
        if (text != NULL)
            print_wrapped(words, expand_words(words, sizeof(words), text + 1,
                                              f, nf),
                          &col, MEANING_INDENT);
        printf("\n");
    }
}

/* ---- The command ----------------------------------------------------------- */

/* 'sluice demo --chat ...': the chat scenario, without argv[at]. */
static int demo_chat_flag(int argc, char **argv, int at)
{
    char **rest = malloc((size_t)argc * sizeof(*rest));
    int n = 0, status;

    if (rest == NULL) {
        cli_error("demo: out of memory");
        return CLI_EXIT_RUNTIME;
    }
    for (int i = 0; i < argc; i++)
        if (i != at)
            rest[n++] = argv[i];
    status = cli_demo_chat(n, rest);
    free(rest);
    return status;
}

/*
 * Plays both traces against each algorithm and measures its memory, into
 * 'r' (one report per algorithm, 'n' of them, indexed by sluice_algo).
 * Returns 0, or the exit status of a failure (reported).
 */
static int measure(report *r, unsigned n, const trace *attack,
                   const trace *steady)
{
    int err;

    for (unsigned a = 0; a < n; a++) {
        sluice_limit limit = SLUICE_LIMIT((sluice_algo)a, DEMO_MAX,
                                          DEMO_WINDOW_MS);

        r[a].algo = (sluice_algo)a;
        if ((err = play(&r[a].attack, &limit, attack)) < 0 ||
            (err = play(&r[a].steady, &limit, steady)) < 0 ||
            (err = key_bytes(&r[a].bytes_small, limit.algo, DEMO_MAX)) < 0 ||
            (err = key_bytes(&r[a].bytes_big, limit.algo, BIG_MAX)) < 0) {
            char what[64];

            snprintf(what, sizeof(what), "demo: %s",
                     sluice_algo_name(limit.algo));
            return cli_lib_error(NULL, what, err);
        }
    }
    return 0;
}

/* What the two traces are, wrapped to DEMO_COLUMNS. */
static void print_scenarios(const trace *steady)
{
    char text[512];
    size_t col = 0;
    int len = snprintf(text, sizeof(text),
                       "Boundary attack: 1 request at t=0 opens the window, "
                       "then %u at t=%u (its last ms) and %u at t=%u (the "
                       "next window's first). Steady: %u requests %u-%u ms "
                       "apart (seed %u), over %.1f s: about twice the budget.",
                       DEMO_MAX, DEMO_WINDOW_MS - 1, DEMO_MAX, DEMO_WINDOW_MS,
                       STEADY_SENT, STEADY_GAP_MIN_MS,
                       STEADY_GAP_MIN_MS + STEADY_GAP_SPREAD_MS - 1,
                       STEADY_SEED,
                       (double)(steady->t[steady->n - 1] + 1) / 1000.0);

    print_wrapped(text, len > 0 ? (size_t)len : 0, &col, 0);
    printf("\n\n");
}

/* The screen: the heading, then the 'n' reports 'r' shown four ways. */
static void print_screen(const palette *p, const report *r, unsigned n,
                         const trace *attack, const trace *steady)
{
    printf("%ssluice demo: max=%u requests per window=1s (%u ms), %s "
           "algorithms%s\n", p->bold, DEMO_MAX, DEMO_WINDOW_MS,
           cli_count_word(n), p->off);
    printf("Embedded store, virtual clock: every figure is a real decision "
           "of the library.\n");
    print_scenarios(steady);
    print_table(p, r, n, attack->n - 1);
    printf("\n");
    print_seam(p, r, n, attack);
    printf("\n");
    print_timeline(p, r, n, steady);
    printf("\n");
    print_meaning(p, r, n, attack);
}

/* True when 'arg' is option 'name', as "NAME" or "NAME=VALUE". */
static bool is_option(const char *arg, const char *name)
{
    size_t n = strlen(name);

    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

int cli_demo(int argc, char **argv)
{
    unsigned n = sluice_algo_count();
    report *r;
    trace attack, steady;
    palette p = palette_pick();
    cli_pos none = {.max = 0}; /* no operands */
    int status;

    if (argc > 0 && strcmp(argv[0], "chat") == 0)
        return cli_demo_chat(argc - 1, argv + 1);
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--chat") == 0)
            return demo_chat_flag(argc, argv, i);
        if (is_option(argv[i], "--store") ||
            is_option(argv[i], "--store-file"))
            return cli_usage_error("demo", "demo: %s is for the chat "
                                   "scenario: sluice demo chat --store URL",
                                   argv[i][7] == '-' ? "--store-file"
                                                     : "--store");
    }
    if ((status = cli_opts_parse("demo", argc, argv, NULL, 0, &none,
                                 CLI_CHECK_LATER)) != 0)
        return status;
    if (n != cli_demo_text_count) {
        cli_error("demo: %u algorithms but the words of %u", n,
                  cli_demo_text_count);
        return CLI_EXIT_RUNTIME;
    }
    if ((r = calloc(n, sizeof(*r))) == NULL) {
        cli_error("demo: out of memory");
        return CLI_EXIT_RUNTIME;
    }
    attack_trace(&attack);
    steady_trace(&steady);
    if ((status = measure(r, n, &attack, &steady)) == 0)
        print_screen(&p, r, n, &attack, &steady);
    free(r);
    return status;
}
