/*
 * main.c - the sluice command: finds the command and runs it, and holds the
 * commands that decide one request (hit, peek) or forget a key (reset).
 *
 *   sluice hit|peek|reset KEY --algo ALGO --max N --window DUR [--cost C]
 *                             [--burst B] [--json] [--store URL]
 *   sluice hit|peek|reset KEY --limit ALGO:MAX/WINDOW[:BURST] [--limit ...] ...
 *                                                          (limits.c)
 *   sluice ttl QUEUE [--max N] --store URL [--json]
 *   sluice replay --algo ALGO --max N --window DUR [--burst B] [--json]
 *                 [--store URL] < TRACE
 *   sluice queue add|take|complete|fail|retry|failed|stats|set-cap QUEUE ...
 *                --store URL [--json]                          (queue.c)
 *   sluice work [QUEUE...] [--pattern GLOB] [--exec CMD] ... --store URL
 *   sluice demo [chat --store URL]                   (demo.c, demo_chat.c)
 *
 * The exit-code rule, one for every command (the codes are CLI_EXIT_* in
 * cli.h; 'sluice --help' states it to users):
 *   0  did what was asked: hit admitted; peek would admit; reset done; ttl
 *      printed its wait; replay decided its trace; a queue subcommand or
 *      work did its job; demo ran.
 *   1  the answer is "no": hit refused; peek would refuse; queue take found
 *      nothing to take (deferred or empty); queue complete or fail lost the
 *      lease; queue retry's job is not a failed job.
 *   2  usage error: anything wrong with what the user gave, found before
 *      the store is asked: arguments, options, numbers, durations, a trace
 *      line, a store URL (--store, --store-file's line or SLUICE_STORE) that
 *      does not parse or has an unknown or invalid option (SLUICE_EURL,
 *      EINVAL, ERANGE from sluice_store_open(): cli_store_open_status()),
 *      a --store-file that cannot be read or is not private, a request that
 *      can never succeed (ECOST, ENOTSUP: cli_lib_error()).
 *   3  store error: the store cannot be opened or reached (ECONN,
 *      ETIMEDOUT), refused us (EAUTH: a password, TLS), is misconfigured
 *      for the URL (ECONFIG, e.g. a cluster node behind valkey://), gave a
 *      bad reply (EPROTO), or failed; also the output cannot be written.
 */
#include "cli.h"

#include <string.h>

/* ---- Help ------------------------------------------------------------------ */

static const char main_help[] =
    "Usage: sluice COMMAND [ARGS...]\n"
    "\n"
    "Asks whether a request fits a budget of MAX units per WINDOW, counted by\n"
    "one of @ALGO_COUNT@ rate-limiting algorithms.\n"
    "\n"
    "Commands:\n"
    "  hit KEY      count a request against KEY's budget; say if it fits\n"
    "  peek KEY     say whether a request would fit, without counting it\n"
    "  reset KEY    forget KEY, so its budget is whole again\n"
    "  ttl QUEUE    a queue's wait in ms before its next job (0 = admit)\n"
    "  replay       decide a trace of requests read on stdin (T KEY [COST])\n"
    "  queue SUB    a job queue held to a cap per queue: add, take,\n"
    "               complete, fail, retry, failed, stats, set-cap\n"
    "  work         run a worker: take jobs from queues and run a command\n"
    "  demo         show, on one screen, how the @ALGO_COUNT@ algorithms "
    "differ;\n"
    "               'demo chat --store URL': the job queue in a chat game\n"
    "  functions    print the Functions library (Redis 7+, Valkey: FCALL\n"
    "               sluice_hit ...), or load it with --load --store URL\n"
    "  help [CMD]   show this help, or a command's\n"
    "\n"
    "A KEY or QUEUE may hold any bytes, but not none: every command refuses\n"
    "an empty one (usually a shell variable that was not set).\n"
    "\n"
    "Options of hit, peek, reset and replay:\n"
    "  --algo ALGO    @ALGOS@\n"
    "  --max N        units admitted per window, 1..@MAX@\n"
    "  --window DUR   the window: 250ms, 1s, 1m30s, 1h, 1d (units d, h, m,\n"
    "                 s, ms, largest first, each once) or a number of ms\n"
    "  --burst B      units admitted at once, 1..N (default N): only\n"
    "                 @BURST_ALGOS@\n"
    "  --store URL    where budgets are counted: mem:// (the default, the\n"
    "                 embedded store) or a server shared by every process\n"
    "                 that uses it, valkey://[[USER]:PASSWORD@]HOST[:PORT]\n"
    "                 [/DB][?OPTIONS] (or redis://...; TLS: valkeys://,\n"
    "                 rediss://), a Unix socket, unix:///PATH[?OPTIONS],\n"
    "                 a cluster, valkey+cluster://HOST:PORT[,HOST:PORT...]\n"
    "                 [?OPTIONS] (TLS: valkeys+cluster://), or a master\n"
    "                 found by Sentinel, valkey+sentinel://HOST:PORT[,...]\n"
    "                 /MASTER[?OPTIONS] (TLS: valkeys+sentinel://);\n"
    "                 OPTIONS: @URL_OPTIONS@\n"
    "  --store-file PATH\n"
    "                 the URL from the first line of file PATH (trailing\n"
    "                 spaces dropped), so that no password shows in 'ps';\n"
    "                 only its owner may read or write it (chmod 600)\n"
    "\n"
    "Every command that takes --store takes --store-file instead (not both),\n"
    "and with neither reads the URL from the environment variable\n"
    "SLUICE_STORE when it is set and not empty; else the command's default\n"
    "applies (mem://, or a usage error where a server is needed).\n"
    "\n"
    "The embedded store lives inside one process: every 'sluice hit' on it\n"
    "starts from an empty store, so it is always admitted. Use 'sluice\n"
    "replay' to see a budget run out, or a server store. ttl, queue, work\n"
    "and demo chat need a server store.\n"
    "\n"
    "Exit status (every command):\n"
    "  0  did what was asked: admitted (hit), would admit (peek), done\n"
    "     (reset, ttl, replay, queue, work, demo)\n"
    "  1  the answer is no: refused (hit), would refuse (peek); queue take:\n"
    "     nothing to take; complete/fail: the lease was lost; retry: not a\n"
    "     failed job\n"
    "  2  usage error, found before the store is asked: a bad command,\n"
    "     option, number, duration or trace line, a store URL (--store,\n"
    "     --store-file, SLUICE_STORE) that does not parse or has an unknown\n"
    "     or invalid option, a --store-file that cannot be read\n"
    "  3  store error: the store cannot be reached, refused us (EAUTH: a\n"
    "     wrong password, a TLS certificate that does not verify), is\n"
    "     misconfigured (ECONFIG: e.g. a cluster node behind valkey://, use\n"
    "     valkey+cluster://), gave a bad reply, or failed\n"
    "\n"
    "Run 'sluice COMMAND --help' for a command's details, 'sluice --version'\n"
    "for the version.\n";

static const char hit_help[] =
    "Usage: sluice hit KEY --algo ALGO --max N --window DUR [--cost C]\n"
    "                      [--burst B] [--json] [--store URL]\n"
    "\n"
    "Decides one request of C units (default 1) against KEY's budget of N\n"
    "units per DUR and, if it fits, counts it.\n"
    "\n"
    "  --algo ALGO    @ALGOS@\n"
    "  --max N        units admitted per window, 1..@MAX@\n"
    "  --window DUR   250ms, 1s, 1m30s, 1h, 1d (units d, h, m, s, ms,\n"
    "                 largest first, each once) or a number of ms\n"
    "  --cost C       units this request takes, 1..N (default 1)\n"
    "  --burst B      units admitted at once, 1..N (default N), so C <= B:\n"
    "                 only @BURST_ALGOS@\n"
    "  --json         print one JSON object instead of a line of text\n"
    "  --store URL    mem:// (default) or valkey://HOST[:PORT][?OPTIONS]\n"
    CLI_STORE_FILE_HELP
    "\n"
    "Prints 'allowed' or 'denied', the budget left, how long to wait before\n"
    "retrying (retry_after_ms, 0 if allowed) and until the budget is whole\n"
    "again (reset_after_ms). With --json:\n"
    "  {\"key\":\"k\",\"algo\":\"fixed\",\"allowed\":true,\"limit\":10,"
    "\"remaining\":9,\n"
    "   \"retry_after_ms\":0,\"reset_after_ms\":1000,\"counted\":true}\n"
    "(\"counted\": the request was counted, which only an admitted hit is;\n"
    "the same decision fields appear wherever a command prints one: peek,\n"
    "each entry of \"limits\", each line of 'replay --json'.)\n"
    "When a server store cannot answer and its URL asks for on_error=open or\n"
    "on_error=closed, the policy decides, and the output says so\n"
    "(fallback=open|closed, or \"fallback\":\"open\"|\"closed\" in JSON).\n"
    "\n"
    "Several limits at once (hit, peek and reset take them alike):\n"
    "  --limit ALGO:MAX/WINDOW[:BURST]   e.g. --limit fixed:10/1s\n"
    "                            --limit sliding-log:1000/1h --limit gcra:5/1s:2\n"
    "given up to 16 times instead of --algo, --max and --window: the request\n"
    "is admitted only if every limit admits it, and counted in all or none.\n"
    "The first line is the combined decision (the largest wait, the least\n"
    "remaining), then a line 'limit ALGO:MAX/WINDOWms ...' for each (with\n"
    "--json, a \"limits\" array of {\"algo\",\"max\",\"window_ms\",\"burst\"\n"
    "and the limit's decision}). Refused as a whole, the request is counted\n"
    "in no limit, and each line says what that limit would answer alone:\n"
    "'limit ... refuses remaining=0 ...' or 'limit ... would-admit\n"
    "remaining=N ... (not counted: the request was refused as a whole)'.\n"
    "Their counts are apart from single-limit hits on the same KEY.\n"
    "\n"
    "The embedded store (mem://) lives inside this one process, so each run\n"
    "starts from an empty store and is admitted; 'sluice replay' shows a\n"
    "budget in use, and a server store (valkey://) keeps it between runs.\n"
    "Options may come before or after KEY. '--' ends the options: every\n"
    "argument after it is KEY, so put it last before a KEY that starts\n"
    "with '-': sluice hit --algo fixed --max 5 --window 1s -- -k\n"
    "\n"
    "Exit status: 0 admitted, 1 refused, 2 usage error, 3 store error.\n";

static const char peek_help[] =
    "Usage: sluice peek KEY --algo ALGO --max N --window DUR [--cost C]\n"
    "                       [--burst B] [--json] [--store URL]\n"
    "\n"
    "Answers exactly what 'sluice hit' would answer now, without counting\n"
    "anything. Options and output are those of 'sluice hit'.\n"
    "\n"
    "The embedded store (mem://) lives inside this one process, so there a\n"
    "peek always sees a whole budget.\n"
    "\n"
    "Exit status: 0 it would be admitted, 1 it would be refused, 2 usage\n"
    "error, 3 store error.\n";

static const char reset_help[] =
    "Usage: sluice reset KEY --algo ALGO [--max N] [--window DUR]\n"
    "                        [--burst B] [--json] [--store URL]\n"
    "\n"
    "Forgets KEY's state for the algorithm, so its budget is whole again.\n"
    "State is kept per (algorithm, key), so --max, --window and --burst may\n"
    "be left out; when given they are checked like hit's.\n"
    "\n"
    "On the embedded store (mem://, the default), which lives inside this one\n"
    "process, there is nothing to forget; the command still checks its\n"
    "arguments. On a server store (valkey://) the key is deleted.\n"
    "\n"
    "Prints 'reset KEY: removed its count', or 'reset KEY: nothing was\n"
    "there' (never hit, already reset, or its budget whole again: expired),\n"
    "as the store answers the reset itself. With --json:\n"
    "  {\"key\":\"k\",\"algo\":\"fixed\",\"reset\":true,\"existed\":true}\n"
    "With --limit, a line per limit follows, or \"limits\":\n"
    "[{\"algo\",\"max\",\"window_ms\",\"burst\",\"existed\"}...]; what each\n"
    "limit held is told by a peek just before the reset (\"existed\": null\n"
    "when a failure policy answered it).\n"
    "\n"
    "Exit status: 0 done, 2 usage error, 3 store error.\n";

static const char ttl_help[] =
    "Usage: sluice ttl QUEUE [--max N] --store URL [--json]\n"
    "\n"
    "The queue limiter's read, on EchoMQ's keys: prints how many ms queue\n"
    "QUEUE must wait before it may take another job, 0 to admit. The queue's\n"
    "fixed-window counter is emq:{QUEUE}:limiter and its cap the field 'max'\n"
    "of the hash emq:{QUEUE}:meta (the prefix 'emq' can be changed with the\n"
    "URL option emq_prefix=). The wait is the counter's remaining lifetime\n"
    "(PTTL), and only when the counter has reached the cap; with no cap\n"
    "known it is 0. A cap in emq:{QUEUE}:meta without a 'duration' there is\n"
    "an error (exit 3), as for 'queue take': it cannot be enforced.\n"
    "\n"
    "  --max N        the cap; without it, read from emq:{QUEUE}:meta\n"
    "  --store URL    valkey://HOST[:PORT][?OPTIONS] (needs a server)\n"
    CLI_STORE_FILE_HELP
    "  --json         print {\"queue\":...,\"wait_ms\":N}\n"
    "\n"
    "Exit status: 0 the wait was printed (whatever it is), 2 usage error,\n"
    "3 store error.\n";

/* ---- hit, peek and reset ----------------------------------------------------- */

typedef enum decide_kind { KIND_HIT, KIND_PEEK, KIND_RESET } decide_kind;

/* Prints one decision as a line of text or, with 'json', a JSON object
   (cli.h: a key, the algorithm and the decision's shape). */
static void print_decision(const cli_request *args, const sluice_decision *d,
                           bool counted)
{
    const char *fallback = cli_fallback_name(d);

    if (args->json) {
        fputs("{\"key\":", stdout);
        cli_json_string(stdout, args->key, args->key_len);
        printf(",\"algo\":\"%s\",", sluice_algo_name(args->limit.algo));
        cli_json_decision(stdout, d, counted);
        printf("}\n");
    } else {
        printf("%s remaining=%llu limit=%llu retry_after_ms=%llu "
               "reset_after_ms=%llu",
               d->allowed ? "allowed" : "denied",
               (unsigned long long)d->remaining, (unsigned long long)d->limit,
               (unsigned long long)d->retry_after_ms,
               (unsigned long long)d->reset_after_ms);
        if (fallback != NULL)
            printf(" fallback=%s", fallback);
        printf("\n");
    }
}

/* reset's answer for 'existed' as text words. */
const char *cli_reset_words(int existed)
{
    return existed > 0    ? "removed its count"
           : existed == 0 ? "nothing was there"
                          : "done (whether anything was there is unknown)";
}

/* reset's answer for 'existed' as a JSON value. */
const char *cli_reset_json(int existed)
{
    return existed > 0 ? "true" : existed == 0 ? "false" : "null";
}

/*
 * Forgets args->key and prints what was there (sluice_reset()'s answer: 1
 * it removed a count, 0 nothing was there); returns the exit status.
 */
static int reset_one(const cli_request *args, sluice_store *store)
{
    int existed = sluice_reset(store, &args->limit, args->key, args->key_len);

    if (existed < 0)
        return cli_lib_error(NULL, "reset", existed);
    if (args->json) {
        fputs("{\"key\":", stdout);
        cli_json_string(stdout, args->key, args->key_len);
        printf(",\"algo\":\"%s\",\"reset\":true,\"existed\":%s}\n",
               sluice_algo_name(args->limit.algo), cli_reset_json(existed));
    } else {
        fputs("reset ", stdout);
        cli_put_safe(stdout, args->key, args->key_len, false);
        printf(": %s\n", cli_reset_words(existed));
    }
    return CLI_EXIT_OK;
}

/*
 * Runs hit, peek or reset ('kind', named 'cmd') on the arguments after the
 * command's name, and returns the exit status.
 */
static int run_decide(decide_kind kind, const char *cmd, int argc, char **argv)
{
    unsigned takes = CLI_TAKES_KEY | CLI_TAKES_ALGO | CLI_TAKES_MAX |
                     CLI_TAKES_WINDOW | CLI_TAKES_JSON | CLI_TAKES_STORE |
                     CLI_TAKES_BURST;
    unsigned needed = CLI_TAKES_KEY | CLI_TAKES_ALGO;
    sluice_store *store = NULL;
    sluice_decision d;
    cli_request args;
    int err, status;

    if (cli_limits_given(argc, argv)) /* several limits: limits.c */
        return cli_decide_all((int)kind, cmd, argc, argv);
    if (kind != KIND_RESET) {
        takes |= CLI_TAKES_COST;
        needed |= CLI_TAKES_MAX | CLI_TAKES_WINDOW;
    }
    if ((status = cli_request_parse(&args, cmd, argc, argv, takes)) != 0 ||
        ((args.given & CLI_TAKES_KEY) &&
         (status = cli_name_check(cmd, "KEY", args.key)) != 0))
        return status;
    /* A reset forgets the key whatever the limit; any valid one will do
       (one that holds a --burst given alone, too). */
    if (!(args.given & CLI_TAKES_MAX))
        args.limit.max = args.limit.burst > 1 ? args.limit.burst : 1;
    if (!(args.given & CLI_TAKES_WINDOW))
        args.limit.window_ms = 1;
    if ((status = cli_request_require(&args, cmd, needed)) != 0 ||
        (status = cli_store_open(&store, cmd, args.store, NULL, NULL)) != 0)
        return status;
    if (kind == KIND_RESET) {
        status = reset_one(&args, store);
        sluice_store_free(store);
        return status;
    }
    if (kind == KIND_HIT)
        err = sluice_hit(&d, store, &args.limit, args.key, args.key_len,
                         args.cost);
    else
        err = sluice_peek(&d, store, &args.limit, args.key, args.key_len,
                          args.cost);
    if (err < 0) {
        /* The arguments were checked already, so this is the store's. */
        status = cli_lib_error(NULL, cmd, err);
    } else {
        /* Counted: a hit the store admitted (a failure policy counts
           nothing). */
        print_decision(&args, &d, kind == KIND_HIT && d.allowed &&
                                      d.fallback == SLUICE_ANSWERED);
        status = d.allowed ? CLI_EXIT_OK : CLI_EXIT_REFUSED;
    }
    sluice_store_free(store);
    return status;
}

static int cmd_hit(int argc, char **argv)
{
    return run_decide(KIND_HIT, "hit", argc, argv);
}

static int cmd_peek(int argc, char **argv)
{
    return run_decide(KIND_PEEK, "peek", argc, argv);
}

static int cmd_reset(int argc, char **argv)
{
    return run_decide(KIND_RESET, "reset", argc, argv);
}

/* ---- ttl -------------------------------------------------------------------- */

static int cmd_ttl(int argc, char **argv)
{
    unsigned takes = CLI_TAKES_KEY | CLI_TAKES_MAX | CLI_TAKES_JSON |
                     CLI_TAKES_STORE;
    sluice_store *store = NULL;
    uint64_t wait_ms = 0;
    cli_request args;
    int err, status;

    if ((status = cli_request_parse(&args, "ttl", argc, argv, takes)) != 0)
        return status;
    if (!(args.given & CLI_TAKES_KEY))
        return cli_usage_error("ttl", "ttl: missing QUEUE");
    if ((status = cli_name_check("ttl", "QUEUE", args.key)) != 0)
        return status;
    if ((status = cli_store_open(&store, "ttl", args.store, "the queue "
                                 "limiter lives on a server: valkey://...",
                                 NULL)) != 0)
        return status;
    err = sluice_emq_rate_limit_ttl(&wait_ms, store, args.key, args.key_len,
                                    (args.given & CLI_TAKES_MAX)
                                        ? args.limit.max : 0);
    if (err < 0) {
        status = cli_lib_error(NULL, "ttl", err);
    } else if (args.json) {
        fputs("{\"queue\":", stdout);
        cli_json_string(stdout, args.key, args.key_len);
        printf(",\"wait_ms\":%llu}\n", (unsigned long long)wait_ms);
    } else {
        printf("%llu\n", (unsigned long long)wait_ms);
    }
    sluice_store_free(store);
    return status;
}

/* ---- Dispatch -------------------------------------------------------------- */

static int cmd_help(int argc, char **argv);

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"hit", cmd_hit, hit_help},
    {"peek", cmd_peek, peek_help},
    {"reset", cmd_reset, reset_help},
    {"ttl", cmd_ttl, ttl_help},
    {"replay", cli_replay, cli_replay_help},
    {"queue", cli_queue, cli_queue_help},
    {"work", cli_work, cli_work_help},
    {"demo", cli_demo, cli_demo_help},
    {"functions", cli_functions, cli_functions_help},
    {"help", cmd_help, main_help},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *command_find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* 'sluice help [CMD]': the overview, or one command's help. */
static int cmd_help(int argc, char **argv)
{
    const struct command *c;

    if (argc == 0) {
        cli_help_print(main_help);
        return CLI_EXIT_OK;
    }
    if (argc > 1)
        return cli_usage_error("help", "help: unexpected argument '%s'",
                               cli_shown(argv[1]));
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        cli_help_print(main_help);
        return CLI_EXIT_OK;
    }
    c = command_find(argv[0]);
    if (c == NULL)
        return cli_usage_error(NULL, "help: unknown command '%s'",
                               cli_shown(argv[0]));
    cli_help_print(c->help);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    const struct command *c;
    int status;

    if (argc < 2)
        return cli_usage_error(NULL, "no command given (try hit, peek, "
                               "reset, ttl, replay, queue, work, demo or functions)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        cli_help_print(main_help);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("sluice %s\n", sluice_version());
        return CLI_EXIT_OK;
    }
    c = command_find(argv[1]);
    if (c == NULL) {
        if (argv[1][0] == '-')
            return cli_usage_error(NULL, "unknown option '%s' (a command "
                                   "comes first)", cli_shown(argv[1]));
        return cli_usage_error(NULL, "unknown command '%s'",
                               cli_shown(argv[1]));
    }
    if (c->run != cmd_help && cli_wants_help(argc - 2, argv + 2)) {
        cli_help_print(c->help);
        return CLI_EXIT_OK;
    }
    status = c->run(argc - 2, argv + 2);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write the output");
        return CLI_EXIT_RUNTIME;
    }
    return status;
}
