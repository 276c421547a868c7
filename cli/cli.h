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

/* How many algorithms the library has, counted from its one list. */
#define CLI__ALGO_PLUS_ONE(name, val, folder) +1
enum { CLI_ALGO_N = 0 SLUICE_ALGO_MAP(CLI__ALGO_PLUS_ONE) };

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
 * Prints "sluice: " and the formatted message, then a newline, on stderr.
 * Standard output is flushed first, so on a terminal the message follows
 * whatever was printed before it.
 */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/*
 * Reports a usage error of command 'cmd' (NULL for none) like cli_error(),
 * adds a line pointing at the command's --help, and returns CLI_EXIT_USAGE,
 * so a caller reads: return cli_usage_error("hit", "missing KEY").
 */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/*
 * Reports that the store at 'url' could not be opened (error 'err'), with
 * the library's detail (sluice_last_error()), as "sluice: --store: ...".
 * A password in the URL is shown as "***", so it never reaches a terminal or
 * a log; a detail that would still reveal it is withheld.
 */
void cli_store_error(const char *url, int err);

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

/* ---- Options --------------------------------------------------------------- */

/* Which options a command takes, as a set of bits. */
enum {
    CLI_TAKES_KEY = 1u << 0, /* one positional KEY */
    CLI_TAKES_ALGO = 1u << 1,
    CLI_TAKES_MAX = 1u << 2,
    CLI_TAKES_WINDOW = 1u << 3,
    CLI_TAKES_COST = 1u << 4,
    CLI_TAKES_JSON = 1u << 5,
    CLI_TAKES_STORE = 1u << 6
};

/* The parsed command line of one command. 'given' says what was present. */
typedef struct cli_args {
    unsigned given;    /* CLI_TAKES_* bits of what the line supplied */
    const char *key;   /* points into argv */
    size_t key_len;
    sluice_limit limit;
    uint64_t cost;     /* 1 unless --cost was given */
    bool json;
    const char *store; /* "mem://" unless --store was given */
} cli_args;

/*
 * Parses the arguments that follow command 'cmd' ('argc' of them from
 * 'argv'), accepting only the options in 'takes'. Options may come before or
 * after KEY, as "--opt VALUE" or "--opt=VALUE"; "--" ends the options, so a
 * key may start with '-'. Each value is checked on its own (a number's range,
 * a duration, an algorithm's name); whether required options are present is
 * cli_args_require()'s job. Returns 0, or reports the problem and returns
 * CLI_EXIT_USAGE.
 */
int cli_args_parse(cli_args *out, const char *cmd, int argc, char **argv,
                   unsigned takes);

/*
 * Checks that every option in 'needed' was given and that the limit, and the
 * cost if one was given, make sense together: a cost above max can never be
 * admitted, and sluice_limit_check() must accept the limit. Returns 0, or
 * reports the problem and returns CLI_EXIT_USAGE.
 */
int cli_args_require(const cli_args *args, const char *cmd, unsigned needed);

/*
 * The options of commands whose arguments do not fit cli_args (the queue
 * commands, work, demo chat): each command lists its options in a table of
 * cli_opt, and cli_opts_parse() fills in what the line gave. Values are
 * checked afterwards, one by one, with cli_opt_u64() and cli_opt_duration().
 */
typedef struct cli_opt {
    const char *name;  /* "--lease" */
    bool has_value;    /* false for a flag such as --json */
    const char *value; /* set by the parse: the value ("" for a flag given),
                          or NULL when the option is absent */
} cli_opt;

/*
 * Parses the 'argc' arguments 'argv' that follow command 'cmd' against the
 * 'nopts' options 'opts', with the rules of cli_args_parse() ("--opt VALUE"
 * or "--opt=VALUE", anywhere on the line; "--" ends the options; an option
 * given twice is an error). The other arguments are stored, in order, into
 * 'pos', of which at most 'pos_max' are accepted ('*npos' says how many);
 * 'pos_what' names them in the message about one too many, e.g. "QUEUE ID
 * LEASE". Returns 0, or reports the problem and returns CLI_EXIT_USAGE.
 */
int cli_opts_parse(const char *cmd, int argc, char **argv, cli_opt *opts,
                   size_t nopts, const char **pos, size_t *npos,
                   size_t pos_max, const char *pos_what);

/* The value of option 'name' in 'opts' (NULL when absent or unknown). */
const char *cli_opt_value(const cli_opt *opts, size_t nopts, const char *name);

/*
 * Checks 'text', the value of 'what' (an option's name, or a positional's
 * such as "ID") of command 'cmd', as a whole number in 'lo'..'hi' (see
 * cli_parse_u64()). Returns 0, or reports and returns CLI_EXIT_USAGE.
 */
int cli_opt_u64(uint64_t *out, const char *cmd, const char *what,
                const char *text, uint64_t lo, uint64_t hi);

/*
 * Checks 'text', the value of option 'what' of command 'cmd', as a duration
 * (sluice_duration_parse(): 250ms, 1s, 1m, 1h or a number of ms); with
 * 'zero_ok', "0" (or "0ms", "0s"...) is accepted too and means 0. Returns 0,
 * or reports and returns CLI_EXIT_USAGE.
 */
int cli_opt_duration(uint64_t *out, const char *cmd, const char *what,
                     const char *text, bool zero_ok);

/* True when 'argv' asks for help ("--help" or "-h") before any "--". */
bool cli_wants_help(int argc, char **argv);

/* ---- Output ---------------------------------------------------------------- */

/*
 * Writes 'len' bytes of 's' to 'f' as a JSON string, quotes included.
 * Quotes, backslashes and control characters are escaped; valid UTF-8 passes
 * through and each byte that is not part of valid UTF-8 becomes U+FFFD, so
 * the output is always valid JSON.
 */
void cli_json_string(FILE *f, const char *s, size_t len);

/* ---- Commands -------------------------------------------------------------- */

/* Each takes the arguments after its name and returns an exit status. */
int cli_replay(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_queue(int argc, char **argv);
int cli_work(int argc, char **argv);

extern const char cli_replay_help[];
extern const char cli_demo_help[];
extern const char cli_queue_help[];
extern const char cli_work_help[];

/*
 * 'sluice demo chat --store URL' (demo_chat.c): the chat game on the job
 * queue; 'argc' and 'argv' are the arguments after "chat".
 */
int cli_demo_chat(int argc, char **argv);

#endif /* SLUICE_CLI_H */
