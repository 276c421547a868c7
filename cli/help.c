/*
 * help.c - the facts the help texts and messages quote that belong to the
 * library (the algorithms, the bound on max, the store URL's options), read
 * from its public API when they are printed, so they never drift from it.
 */
#include "cli.h"

#include <string.h>

/*
 * A line that a placeholder lengthens is wrapped to this many columns, the
 * width of the --store paragraph of 'sluice --help', where the list of URL
 * options goes.
 */
#define HELP_COLUMNS 69

/* ---- The library's facts --------------------------------------------------- */

const char *cli_algo_list(void)
{
    static char list[256];
    unsigned n = sluice_algo_count();
    size_t used = 0;

    if (list[0] != '\0')
        return list;
    for (unsigned i = 0; i < n && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                 i == 0 ? "" : i + 1 < n ? ", " : " or ",
                                 sluice_algo_name((sluice_algo)i));
    return list;
}

const char *cli_burst_algo_list(void)
{
    static char list[256];
    unsigned n = sluice_algo_count(), found = 0;
    size_t used = 0;

    if (list[0] != '\0')
        return list;
    /* An algorithm takes a burst when a limit with burst 1 is valid. */
    for (unsigned i = 0; i < n && used < sizeof(list); i++) {
        sluice_limit l = SLUICE_LIMIT((sluice_algo)i, 1, 1);

        l.burst = 1;
        if (sluice_limit_check(&l) == SLUICE_OK)
            used += (size_t)snprintf(list + used, sizeof(list) - used,
                                     "%s%s", found++ == 0 ? "" : ", ",
                                     sluice_algo_name((sluice_algo)i));
    }
    if (found == 0)
        snprintf(list, sizeof(list), "(none)");
    return list;
}

const char *cli_count_word(unsigned n)
{
    static const char *const words[] = {
        "zero", "one", "two", "three", "four", "five",
        "six", "seven", "eight", "nine", "ten",
    };
    static char digits[16];

    if (n < sizeof(words) / sizeof(words[0]))
        return words[n];
    snprintf(digits, sizeof(digits), "%u", n);
    return digits;
}

/* ---- Printing help --------------------------------------------------------- */

/* Where the output is on its line. */
typedef struct column {
    size_t at;     /* the column of the next character */
    size_t indent; /* the spaces that start the line */
} column;

static void put_char(column *col, char c)
{
    putchar(c);
    if (c == '\n') {
        col->at = 0;
        col->indent = 0;
    } else {
        if (c == ' ' && col->indent == col->at)
            col->indent++;
        col->at++;
    }
}

/*
 * Writes 'text', a list of words separated by single spaces, breaking it
 * between words where a line would pass HELP_COLUMNS; a line it continues
 * on is indented like the line it started on (or like its first word, when
 * the caller set col->indent there).
 */
static void put_words(column *col, const char *text)
{
    bool first = true;

    while (*text != '\0') {
        size_t len = strcspn(text, " ");

        if (!first && col->at + 1 + len > HELP_COLUMNS) {
            size_t indent = col->indent;

            put_char(col, '\n');
            while (col->at < indent)
                put_char(col, ' ');
        } else if (!first) {
            put_char(col, ' ');
        }
        for (size_t i = 0; i < len; i++)
            put_char(col, text[i]);
        text += len;
        text += strspn(text, " ");
        first = false;
    }
}

static const char *max_text(void)
{
    static char text[24];

    snprintf(text, sizeof(text), "%llu", (unsigned long long)SLUICE_MAX_MAX);
    return text;
}

static const char *algo_count_text(void)
{
    return cli_count_word(sluice_algo_count());
}

/* The library's default lease, as a duration: "30s". */
static const char *lease_text(void)
{
    static char text[24];
    uint64_t ms = SLUICE_LEASE_DEFAULT_MS;

    if (ms % 1000 == 0)
        snprintf(text, sizeof(text), "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(text, sizeof(text), "%llums", (unsigned long long)ms);
    return text;
}

/* The placeholders of the help texts, and what each stands for. */
static const struct placeholder {
    const char *name;
    const char *(*text)(void);
} placeholders[] = {
    {"@ALGOS@", cli_algo_list},
    {"@ALGO_COUNT@", algo_count_text},
    {"@BURST_ALGOS@", cli_burst_algo_list},
    {"@LEASE@", lease_text},
    {"@MAX@", max_text},
    {"@URL_OPTIONS@", sluice_store_url_options},
};

/* The placeholder that 'p' starts with, or NULL. */
static const struct placeholder *placeholder_at(const char *p)
{
    for (size_t i = 0; i < sizeof(placeholders) / sizeof(placeholders[0]);
         i++)
        if (strncmp(p, placeholders[i].name, strlen(placeholders[i].name))
            == 0)
            return &placeholders[i];
    return NULL;
}

void cli_help_print(const char *text)
{
    column col = {0, 0};

    for (const char *p = text; *p != '\0';) {
        const struct placeholder *ph = placeholder_at(p);

        if (ph != NULL) {
            /* In an option's column ("  --algo ALGO    @ALGOS@"), the
               wrapped words line up under the first. */
            size_t indent = col.indent;

            if (p - text >= 2 && p[-1] == ' ' && p[-2] == ' ')
                col.indent = col.at;
            put_words(&col, ph->text());
            col.indent = indent;
            p += strlen(ph->name);
        } else {
            put_char(&col, *p++);
        }
    }
}
