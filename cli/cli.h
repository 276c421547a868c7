/*
 * cli.h - what the files of the sluice command-line tool share.
 *
 * The tool uses only the public API (sluice.h). Names shared between its
 * files are 'cli_'; static names carry no prefix.
 */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include "sluice.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define CLI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLI_PRINTF(fmt, args)
#endif

/* ---- Exit status ----------------------------------------------------------- */

/* The one list of exit codes; 'sluice --help' repeats it for users. */
enum {
    CLI_EXIT_OK = 0,      /* admitted, or the command succeeded */
    CLI_EXIT_REFUSED = 1, /* the request was refused: over the limit */
    CLI_EXIT_USAGE = 2,   /* bad command line, number or trace line */
    CLI_EXIT_RUNTIME = 3  /* the store or the library failed */
};

/* ---- Messages -------------------------------------------------------------- */

/*
 * Prints "sluice: " and the formatted message, then a newline, on stderr;
 * the message is written with cli_put_safe(), so the control bytes that
 * it may quote (from a name, a library or a server) never reach the
 * terminal raw. Standard output is flushed first, so on a terminal the
 * message follows whatever was printed before it.
 */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/*
 * Reports a usage error of command 'cmd' (NULL for none) like cli_error(),
 * adds a line pointing at the command's --help, and returns CLI_EXIT_USAGE,
 * so a caller reads: return cli_usage_error("hit", "missing KEY").
 */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/*
 * 'text' made safe to quote in a message: bytes outside printable ASCII are
 * written \xNN, and text past CLI_SHOWN_MAX bytes is cut to "...". The
 * result lives in one of four static buffers, used in turn, so up to four
 * may appear in one message (the tool is single-threaded).
 */
#define CLI_SHOWN_MAX 48
const char *cli_shown(const char *text);

/* True when every byte of 'text' is printable ASCII. */
bool cli_is_plain(const char *text);

/*
 * Writes 'len' bytes of 's' to 'f' safe for a terminal: each byte below
 * 0x20, 0x7F and each byte that is not part of valid UTF-8 is written
 * \xNN (and, with 'space', a space too, for output whose fields are
 * separated by spaces); valid UTF-8 passes through. Every message on
 * stderr is written so, and so is every name that human output on stdout
 * quotes.
 */
void cli_put_safe(FILE *f, const char *s, size_t len, bool space);

/* The same as a NUL-terminated string to free(); NULL without memory. */
char *cli_safe_dup(const char *s, size_t len, bool space);

/* ---- Numbers --------------------------------------------------------------- */

/*
 * Parses 'text' as a whole number in 'lo'..'hi', strictly: decimal digits
 * only, no sign, no spaces, no trailing junk. On failure returns false and
 * writes into 'why' (of 'why_len' bytes) a phrase that quotes the text and
 * names the problem, e.g. "'0' is out of range 1..10"; the caller prefixes
 * what the number was for. Overflow of 64 bits counts as out of range.
 */
bool cli_parse_u64(uint64_t *out, const char *text, uint64_t lo, uint64_t hi,
                   char *why, size_t why_len);

/*
 * True when a request of 'cost' units can fit 'limit' at all: cost <= max,
 * and cost <= burst when it has one. Otherwise writes into 'why' (of
 * 'why_len' bytes) a phrase such as "12 exceeds --max 10, so the request
 * could never be admitted"; the caller prefixes what the cost was
 * ("--cost: ", "line 4: cost ").
 */
bool cli_cost_fits(uint64_t cost, const sluice_limit *limit, char *why,
                   size_t why_len);

/* ---- Options --------------------------------------------------------------- */

/*
 * Each command lists the options it takes in a table of cli_opt, and
 * cli_opts_parse() reads its line by that table. An entry says how its value
 * is checked and where the checked value goes ('out', of the C type named
 * below); the CLI_OPT_* macros build entries and check that type.
 */
typedef enum cli_value {
    CLI_VALUE_FLAG,       /* no value: true, into a bool */
    CLI_VALUE_TEXT,       /* any text, as given: into a const char * */
    CLI_VALUE_NUMBER,     /* a whole number in 'lo'..'hi' (cli_parse_u64()):
                             into a uint64_t */
    CLI_VALUE_DURATION,   /* a duration (sluice_duration_parse(): 250ms,
                             1m30s, 1d or a number of ms), in ms: a uint64_t */
    CLI_VALUE_DURATION_0, /* the same, or a zero ("0", "0s"...) meaning 0 */
    CLI_VALUE_ALGO        /* an algorithm's name: into a sluice_algo */
} cli_value;

typedef struct cli_opt {
    const char *name;  /* "--lease" */
    cli_value type;
    void *out;         /* where the checked value goes */
    uint64_t lo, hi;   /* the range of a CLI_VALUE_NUMBER */
    const char *value; /* set by the parse: the text given ("" for a flag),
                          or NULL when the option is absent */
} cli_opt;

/* 'p' as the 'out' of an entry, if it points to a 'type' (else a warning). */
#define CLI__OUT(type, p) ((void *)(1 ? (p) : (type *)0))

#define CLI_OPT_FLAG(name_, out_)              \
    {.name = (name_), .type = CLI_VALUE_FLAG,  \
     .out = CLI__OUT(bool, out_)}
#define CLI_OPT_TEXT(name_, out_)              \
    {.name = (name_), .type = CLI_VALUE_TEXT,  \
     .out = CLI__OUT(const char *, out_)}
#define CLI_OPT_NUMBER(name_, out_, lo_, hi_)  \
    {.name = (name_), .type = CLI_VALUE_NUMBER, \
     .out = CLI__OUT(uint64_t, out_), .lo = (lo_), .hi = (hi_)}
#define CLI_OPT_DURATION(name_, out_)            \
    {.name = (name_), .type = CLI_VALUE_DURATION, \
     .out = CLI__OUT(uint64_t, out_)}
#define CLI_OPT_DURATION_0(name_, out_)            \
    {.name = (name_), .type = CLI_VALUE_DURATION_0, \
     .out = CLI__OUT(uint64_t, out_)}
#define CLI_OPT_ALGO(name_, out_)              \
    {.name = (name_), .type = CLI_VALUE_ALGO,  \
     .out = CLI__OUT(sluice_algo, out_)}

/*
 * The arguments of a line that are not options (operands, such as KEY or
 * QUEUE ID LEASE): the parse stores at most 'max' of them, in order, into
 * 'args', and sets 'n'.
 */
typedef struct cli_pos {
    const char **args;
    size_t max;
    const char *what; /* their names, e.g. "QUEUE ID LEASE", for the message
                         about one too many */
    bool is_key;      /* the one operand is a KEY: that message says instead
                         that KEY is already given (a key is one argument) */
    size_t n;         /* set by the parse */
} cli_pos;

/* When cli_opts_parse() checks the values. */
typedef enum cli_when {
    CLI_CHECK_LATER,  /* the caller calls cli_opts_check() when it will */
    CLI_CHECK_AT_ONCE /* each value as it is read, so a bad value is reported
                         before anything that follows it on the line */
} cli_when;

/*
 * Parses the 'argc' arguments 'argv' that follow command 'cmd' against the
 * 'nopts' options 'opts' and the operands 'pos'. Options may come before or
 * after the operands, as "--opt VALUE" or "--opt=VALUE"; "--" ends the
 * options, so an operand may start with '-'. An unknown option, an option
 * given twice, a missing value, a flag given a value and one operand too
 * many are errors; values are checked as 'when' says. Whether required
 * options and operands are present is the caller's to check. Returns 0, or
 * reports the problem and returns CLI_EXIT_USAGE.
 */
int cli_opts_parse(const char *cmd, int argc, char **argv, cli_opt *opts,
                   size_t nopts, cli_pos *pos, cli_when when);

/*
 * Checks the value of every option given in 'opts' (of 'nopts'), in the
 * table's order, into its 'out'; a message names command 'cmd'. Returns 0,
 * or reports the first problem and returns CLI_EXIT_USAGE.
 */
int cli_opts_check(const char *cmd, const cli_opt *opts, size_t nopts);

/* The value of option 'name' in 'opts' (NULL when absent or unknown). */
const char *cli_opt_value(const cli_opt *opts, size_t nopts, const char *name);

/*
 * Checks 'text', the value of 'what' (an option's name, or an operand's
 * such as "ID") of command 'cmd', as a whole number in 'lo'..'hi' (see
 * cli_parse_u64()). Returns 0, or reports and returns CLI_EXIT_USAGE.
 */
int cli_opt_u64(uint64_t *out, const char *cmd, const char *what,
                const char *text, uint64_t lo, uint64_t hi);

/*
 * Checks that 'name', operand 'what' ("KEY", "QUEUE", "QUEUE 2") of command
 * 'cmd', is not empty. The library takes the empty name, but on a command
 * line it is nearly always a shell variable that was not set, so every
 * command refuses it alike. Returns 0, or reports and returns
 * CLI_EXIT_USAGE.
 */
int cli_name_check(const char *cmd, const char *what, const char *name);

/* True when 'argv' asks for help ("--help" or "-h") before any "--". */
bool cli_wants_help(int argc, char **argv);

/* ---- Requests -------------------------------------------------------------- */

/*
 * The options of the commands that decide requests against a limit (hit,
 * peek, reset, replay) or read one (ttl): each takes a set of them.
 */
enum {
    CLI_TAKES_ALGO = 1u << 0,
    CLI_TAKES_MAX = 1u << 1,
    CLI_TAKES_WINDOW = 1u << 2,
    CLI_TAKES_COST = 1u << 3,
    CLI_TAKES_JSON = 1u << 4,
    CLI_TAKES_STORE = 1u << 5,
    CLI_TAKES_BURST = 1u << 6,
    CLI_TAKES_KEY = 1u << 7 /* one operand, KEY */
};

/* The line of such a command. 'given' says what was present. */
typedef struct cli_request {
    unsigned given;     /* CLI_TAKES_* bits of what the line supplied */
    const char *key;    /* points into argv */
    size_t key_len;
    sluice_limit limit; /* --algo, --max, --window, --burst */
    uint64_t cost;      /* 1 unless --cost was given */
    bool json;
    const char *store;  /* the URL (cli_store_url()), or NULL for none */
} cli_request;

/*
 * Parses the arguments that follow command 'cmd' ('argc' of them from
 * 'argv'), accepting only what 'takes' names, with cli_opts_parse(); each
 * value is checked as it is read (a number's range, a duration, an
 * algorithm's name). Returns 0, or reports the problem and returns
 * CLI_EXIT_USAGE.
 */
int cli_request_parse(cli_request *out, const char *cmd, int argc,
                      char **argv, unsigned takes);

/*
 * Checks that every option in 'needed' was given and that the limit, and the
 * cost if one was given, make sense together: a cost above max can never be
 * admitted, and sluice_limit_check() must accept the limit. Returns 0, or
 * reports the problem and returns CLI_EXIT_USAGE.
 */
int cli_request_require(const cli_request *r, const char *cmd,
                        unsigned needed);

/*
 * hit, peek and reset over several limits (limits.c): whether the line has
 * a --limit (before any "--"), and the command run on such a line ('kind'
 * 0 hit, 1 peek, 2 reset), which answers its exit status.
 */
bool cli_limits_given(int argc, char **argv);

/*
 * reset's answer to "was anything there?" (main.c), 1 yes, 0 no, -1 unknown
 * (a failure policy answered the peek of a --limit reset), as words and as
 * a JSON value.
 */
const char *cli_reset_words(int existed);
const char *cli_reset_json(int existed);
int cli_decide_all(int kind, const char *cmd, int argc, char **argv);

/* ---- The store ------------------------------------------------------------- */

/*
 * True when 'url' names the embedded store, by sluice_store_open()'s
 * contract: NULL, "" or "mem://".
 */
bool cli_url_is_embedded(const char *url);

/*
 * Where a command's store URL comes from, the first found of: --store URL
 * (in argv, which 'ps' shows); --store-file PATH, the first line of a file
 * only its owner may read; the environment variable SLUICE_STORE (when set
 * and not empty); else none, and the command's default applies. Every
 * command that takes --store takes --store-file, and the same help line
 * (CLI_STORE_FILE_HELP) says so.
 */
#define CLI_STORE_ENV "SLUICE_STORE"
#define CLI_STORE_FILE_LINE_MAX 4096 /* the longest first line taken */
#define CLI_STORE_FILE_HELP                                                 \
    "  --store-file PATH\n"                                                  \
    "                 the URL from the first line of file PATH, which only\n" \
    "                 its owner may read (chmod 600), so that no password\n"  \
    "                 shows in 'ps'; with neither option, $SLUICE_STORE\n"

/*
 * Settles the store URL of command 'cmd': '*url' is the --store given (or
 * NULL) and 'file' the --store-file given (or NULL). Both at once is a
 * usage error. With 'file', '*url' becomes its first line, trailing
 * whitespace stripped; a file that cannot be opened, is not a regular
 * file, may be read or written by anyone but its owner (the fix, "chmod 600
 * PATH", is named), whose first line is empty, longer than
 * CLI_STORE_FILE_LINE_MAX bytes or holds a NUL byte, is refused. With
 * neither, '*url' becomes $SLUICE_STORE when it is set and not empty, else
 * stays NULL. What is refused is reported (never quoting the file's
 * text) and the answer is CLI_EXIT_USAGE; else 0. The URL read lives until
 * the process ends; cli_store_error() names where it came from.
 */
int cli_store_url(const char **url, const char *cmd, const char *file);

/*
 * Opens the store at 'url', the --store of command 'cmd', with 'opts' (NULL
 * for the defaults). Without a URL (NULL), a command whose work lives on a
 * server reports a usage error, "CMD: missing --store (SERVER_WHY)", where
 * 'server_why' says why, e.g. "queues live on a server: valkey://HOST";
 * when 'server_why' is NULL the embedded store (mem://) is opened instead.
 * A store that cannot be opened is reported with cli_store_error(). Returns
 * 0, or the exit status of the failure (reported).
 */
int cli_store_open(sluice_store **store, const char *cmd, const char *url,
                   const char *server_why, const sluice_store_opts *opts);

/*
 * Reports that the store at 'url' could not be opened (error 'err'), with
 * the library's detail (sluice_last_error()), as "sluice: --store: ..."
 * (or "--store-file PATH: ...", "SLUICE_STORE: ...": where cli_store_url()
 * found the URL).
 * The library shows a URL's password as "***"; as a last resort, a detail
 * that still quotes the whole password (of CLI_SECRET_MIN bytes or more,
 * so that a short one does not hide every message by chance) is withheld.
 */
#define CLI_SECRET_MIN 4
void cli_store_error(const char *url, int err);

/*
 * The exit status of sluice_store_open()'s failure 'err': CLI_EXIT_USAGE for
 * a URL the library refused before connecting (it does not parse, or has an
 * unknown or invalid option: SLUICE_EURL, SLUICE_EINVAL, SLUICE_ERANGE), else
 * CLI_EXIT_RUNTIME (the store could not be reached, refused us, is
 * misconfigured for the URL, or failed).
 */
int cli_store_open_status(int err);

/*
 * Reports the failure 'err' of a library call made for 'what' ("queue
 * take", "replay: line 4") as "sluice: WHAT: DETAIL (NAME)", with
 * sluice_last_error()'s detail, and returns its exit status. A request that
 * can never succeed is a usage error, CLI_EXIT_USAGE: SLUICE_ECOST (a cost
 * above max) and SLUICE_ENOTSUP (the store has no such thing: the embedded
 * one has no queues); with 'help_cmd' (not NULL) the message then points at
 * that command's --help. Anything else is the store's or the library's,
 * CLI_EXIT_RUNTIME.
 */
int cli_lib_error(const char *help_cmd, const char *what, int err);

/* ---- Jobs ------------------------------------------------------------------ */

/* How jobs are taken and failed: 'queue take', 'queue fail' and 'work'. */
typedef struct cli_job_opts {
    uint64_t lease_ms;     /* --lease */
    uint64_t max_attempts; /* --max-attempts: taken this often, it fails */
    uint64_t backoff_ms;   /* --backoff: before a retry, doubled each time */
} cli_job_opts;

/* What they assume unless told; the lease is the library's default. */
#define CLI_JOB_OPTS_INIT \
    {.lease_ms = SLUICE_LEASE_DEFAULT_MS, .max_attempts = 3u, .backoff_ms = 1000u}

#define CLI_MAX_ATTEMPTS_MAX 1000000u

/* The most a payload may hold: a server takes less than 512 MB in one
   string (its proto-max-bulk-len), so no more is read from stdin. */
#define CLI_PAYLOAD_MAX ((size_t)512 * 1024 * 1024)

/* Why queue and work need --store (cli_store_open()'s 'server_why'). */
#define CLI_QUEUES_NEED_SERVER "queues live on a server: valkey://HOST[:PORT]"

/* ---- Help ------------------------------------------------------------------ */

/*
 * Prints help text 'text' on stdout, each placeholder in it replaced by the
 * library's fact it names, so that no help text restates one:
 *   @ALGOS@        the algorithms' names (cli_algo_list()): "fixed,
 *                  sliding-counter, ... or" the last of SLUICE_ALGO_MAP
 *   @ALGO_COUNT@   how many algorithms there are, in words:
 *                  cli_count_word(sluice_algo_count())
 *   @BURST_ALGOS@  the names of those that take a burst (cli_burst_algo_list())
 *   @MAX@          the largest max, SLUICE_MAX_MAX
 *   @URL_OPTIONS@  the options a store URL takes (sluice_store_url_options())
 * A placeholder's words that would run past the width of the help texts'
 * option paragraphs go on to the next line, indented like the line.
 */
void cli_help_print(const char *text);

/*
 * The names of the library's algorithms, in SLUICE_ALGO_MAP's order, as a
 * phrase for a message: "fixed, sliding-counter, ... or NAME", every name
 * with the last after "or" (a single one alone).
 */
const char *cli_algo_list(void);

/* The names of the algorithms that take a burst, joined by ", " (e.g.
   "gcra"), or "(none)". */
const char *cli_burst_algo_list(void);

/* 'n' in words ("three") up to ten, else in digits (a static buffer). */
const char *cli_count_word(unsigned n);

/* ---- Time ------------------------------------------------------------------ */

/* Milliseconds on the monotonic clock, for intervals within one process. */
uint64_t cli_mono_ms(void);

/* ---- Output ---------------------------------------------------------------- */

/* True when the 'len' bytes at 's' are valid UTF-8 (RFC 3629). */
bool cli_utf8_valid(const char *s, size_t len);

/*
 * Writes the 'len' bytes at 'data' to 'f' in standard base64 (RFC 4648,
 * with '=' padding, no line breaks), for bytes that JSON strings cannot
 * carry exactly.
 */
void cli_base64(FILE *f, const void *data, size_t len);

/*
 * Writes 'len' bytes of 's' to 'f' as a JSON string, quotes included.
 * Quotes, backslashes and control characters are escaped; valid UTF-8 passes
 * through and each byte that is not part of valid UTF-8 becomes U+FFFD, so
 * the output is always valid JSON.
 */
void cli_json_string(FILE *f, const char *s, size_t len);

/*
 * The JSON shapes every command shares (one per concept), written without
 * the braces around them so a caller adds its own fields:
 *   a decision  "allowed":B,"limit":N,"remaining":N,"retry_after_ms":N,
 *               "reset_after_ms":N,"counted":B[,"fallback":"open"|"closed"]
 *               where "counted" says whether the request was counted (a
 *               hit admitted; never for a peek, a refusal or a limit of a
 *               several-limit request refused as a whole);
 *   a limit     "algo":"NAME","max":N,"window_ms":N,"burst":N (0: the
 *               algorithm's default), the entries of every "limits" array.
 * A key is "key", a queue "queue", both JSON strings (cli_json_string()).
 */
void cli_json_decision(FILE *f, const sluice_decision *d, bool counted);
void cli_json_limit(FILE *f, const sluice_limit *l);

/* "open" or "closed" when a failure policy decided 'd', else NULL. */
const char *cli_fallback_name(const sluice_decision *d);

/* ---- Commands -------------------------------------------------------------- */

/*
 * Each takes the arguments after its name and returns an exit status. Its
 * help text is what 'sluice CMD --help' prints through cli_help_print().
 */
int cli_replay(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_queue(int argc, char **argv);
int cli_work(int argc, char **argv);
int cli_functions(int argc, char **argv);

extern const char cli_replay_help[];
extern const char cli_demo_help[];
extern const char cli_queue_help[];
extern const char cli_work_help[];
extern const char cli_functions_help[];

/*
 * What the demo says of each algorithm, indexed by sluice_algo: the text of
 * its src/algo/FOLDER/demo.txt without its '#' lines (demo_texts.c, written
 * by cli/CMakeLists.txt; demo.c says what the lines hold).
 */
extern const char *const cli_demo_texts[];
extern const unsigned cli_demo_text_count;

/*
 * 'sluice demo chat --store URL' (demo_chat.c): the chat game on the job
 * queue; 'argc' and 'argv' are the arguments after "chat".
 */
int cli_demo_chat(int argc, char **argv);

#endif /* SLUICE_CLI_H */
