/*
 * queue.c - 'sluice queue ...': the job queue one operation at a time.
 *
 *   sluice queue add|take|complete|fail|retry|failed|stats|set-cap QUEUE ...
 *                --store URL [--json]
 *
 * Queues live on a server store only (the embedded store answers
 * SLUICE_ENOTSUP): that is a usage error here, exit 2, like a missing
 * --store. A lost lease, a take with nothing to take and a retry of a job
 * that is not failed are results, exit 1, not errors.
 *
 * 'sluice work', a worker that serves queues until told to stop, is in
 * work.c.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_FAILED_LIMIT 100u
#define FAILED_LIMIT_MAX 100000u
#define ID_MAX ((uint64_t)INT64_MAX) /* ids and leases are server integers */

const char cli_queue_help[] =
    "Usage: sluice queue SUBCOMMAND QUEUE [ARGS...] --store URL [--json]\n"
    "\n"
    "A job queue on a server store whose dequeue point holds each queue to\n"
    "its cap, so that one flooding queue (a chat, a user) cannot starve the\n"
    "others. The cap is counted on the server, so it is one budget shared by\n"
    "every worker process.\n"
    "\n"
    "Subcommands:\n"
    "  add QUEUE [--data TEXT | --lines] [--delay DUR]\n"
    "      Adds a job and prints its id. The payload is TEXT or, without\n"
    "      --data, standard input when it is not a terminal (else empty),\n"
    "      read up to 512 MB. A payload that a take could not read back\n"
    "      (over the URL's max_reply_bytes less 1 KB) is a usage error.\n"
    "      With --lines, adds one job per line of standard input (its\n"
    "      payload the line without its newline; an empty line is a job\n"
    "      with an empty payload, and a last line without a newline\n"
    "      counts), in batches of one round trip each, and prints their ids\n"
    "      one per line as each batch is added.\n"
    "      With --delay the job is not taken before DUR has passed.\n"
    "  take QUEUE [--lease DUR]\n"
    "      Takes the next job under a lease of DUR (default @LEASE@) and prints\n"
    "      'job ID attempt N lease L', then the payload (plus a newline if it\n"
    "      does not end with one). With --json the payload's bytes are\n"
    "      exact: \"payload\", a JSON string, when they are valid UTF-8, else\n"
    "      \"payload_base64\", the bytes in standard base64. Over the cap it\n"
    "      takes nothing and prints 'deferred WAIT_MS', the ms until the\n"
    "      window resets; with nothing ready it prints 'empty', or\n"
    "      'empty WAIT_MS' when a delayed job or a lease falls due then.\n"
    "  complete QUEUE ID LEASE\n"
    "      Finishes the job taken under lease LEASE; prints 'done'.\n"
    "  fail QUEUE ID LEASE [--max-attempts N] [--backoff DUR]\n"
    "      Prints 'retrying': the job goes back to wait after DUR x\n"
    "      2^(attempt - 1) (default 1s; 0 for at once); or 'failed': it was\n"
    "      taken N times (default 3) and moves to the failed set.\n"
    "  retry QUEUE ID        moves a failed job back to wait, its attempts\n"
    "                        counted afresh; prints 'retried'\n"
    "  failed QUEUE [--limit N]\n"
    "                        the ids of up to N (default 100) failed jobs,\n"
    "                        oldest first, one per line\n"
    "  stats QUEUE           jobs waiting, active, delayed, failed and\n"
    "                        completed; the cap (max per duration_ms;\n"
    "                        max=none, in JSON null: no cap); jobs taken in\n"
    "                        the current window (count)\n"
    "                        and the wait before the next take (wait_ms)\n"
    "  set-cap QUEUE --max N --per DUR\n"
    "                        at most N jobs taken per DUR, by all workers\n"
    "                        together; --max 0 removes the cap\n"
    "\n"
    "  --store URL    valkey://HOST[:PORT][?OPTIONS] or redis://...; required:\n"
    "                 the embedded store (mem://) has no queues. Queue q's\n"
    "                 keys are emq:{q}:*; the URL option emq_prefix= moves them\n"
    CLI_STORE_FILE_HELP
    "  --json         print one JSON object: add {\"queue\",\"id\"} (with\n"
    "                 --lines {\"queue\",\"ids\":[IDS]}); take\n"
    "                 {\"queue\",\"status\":\"job\",\"id\",\"attempt\",\"lease\",\n"
    "                 \"payload\"|\"payload_base64\"} or {\"queue\",\"status\":\n"
    "                 \"deferred\"|\"empty\",\"wait_ms\"}; complete and fail\n"
    "                 {\"queue\",\"id\",\"outcome\":\"done\"|\"retrying\"|\n"
    "                 \"failed\"|\"lost\"}; retry {\"queue\",\"id\",\"retried\"};\n"
    "                 failed {\"queue\",\"failed\":[IDS]}; stats and set-cap\n"
    "                 the figures named above\n"
    "\n"
    "A lease is proven by its token: once it has run out (the job went back\n"
    "to wait for another worker) or the job was finished, complete and fail\n"
    "print 'lost' and exit 1, and the job is left to whoever holds it now.\n"
    "\n"
    "Exit status: 0 done (take: a job was taken); 1 take found nothing to\n"
    "take (deferred or empty), complete or fail lost the lease, or retry's\n"
    "job is not a failed job; 2 usage error, a store without queues or a\n"
    "payload too large; 3 store error.\n";

/* ---- The subcommands ------------------------------------------------------- */

/* Options of the queue subcommands; each takes a subset. */
enum {
    O_STORE, O_STORE_FILE, O_JSON, O_DATA, O_LINES, O_DELAY, O_LEASE, O_MAX_ATTEMPTS,
    O_BACKOFF, O_LIMIT, O_MAX, O_PER, NOPTS
};

#define BIT(o) (1u << (o))

/* What a queue subcommand was given, checked. */
typedef struct qargs {
    const char *cmd; /* "queue take", for messages */
    const char *queue;
    size_t queue_len;
    uint64_t id, lease;
    const char *store, *store_file;
    bool json, lines;
    const char *data;
    size_t data_len;
    char *data_owned; /* read from stdin */
    cli_job_opts job; /* --lease, --max-attempts, --backoff */
    uint64_t delay_ms, limit, max, per_ms;
} qargs;

typedef int (*sub_fn)(sluice_store *store, qargs *a);

static int sub_add(sluice_store *store, qargs *a);
/*
 * A payload as a JSON field, exactly: "payload" (a string) when it is
 * valid UTF-8, else "payload_base64" (its bytes in base64).
 */
static void print_payload(const char *payload, size_t len)
{
    if (cli_utf8_valid(payload, len)) {
        fputs("\"payload\":", stdout);
        cli_json_string(stdout, payload, len);
    } else {
        fputs("\"payload_base64\":\"", stdout);
        cli_base64(stdout, payload, len);
        putchar('"');
    }
}

static int sub_take(sluice_store *store, qargs *a);
static int sub_complete(sluice_store *store, qargs *a);
static int sub_fail(sluice_store *store, qargs *a);
static int sub_retry(sluice_store *store, qargs *a);
static int sub_failed(sluice_store *store, qargs *a);
static int sub_stats(sluice_store *store, qargs *a);
static int sub_set_cap(sluice_store *store, qargs *a);

static const struct subcommand {
    const char *name;
    size_t npos;           /* QUEUE, then ID, then LEASE */
    unsigned takes;        /* BIT(O_*) beyond --store, --store-file and
                              --json */
    sub_fn run;
} subcommands[] = {
    {"add", 1, BIT(O_DATA) | BIT(O_LINES) | BIT(O_DELAY), sub_add},
    {"take", 1, BIT(O_LEASE), sub_take},
    {"complete", 3, 0, sub_complete},
    {"fail", 3, BIT(O_MAX_ATTEMPTS) | BIT(O_BACKOFF), sub_fail},
    {"retry", 2, 0, sub_retry},
    {"failed", 1, BIT(O_LIMIT), sub_failed},
    {"stats", 1, 0, sub_stats},
    {"set-cap", 1, BIT(O_MAX) | BIT(O_PER), sub_set_cap},
};

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static const char *const pos_names[] = {"QUEUE", "ID", "LEASE"};

/*
 * Fills 'opts' (room for NOPTS) with the options of subcommand 'sub', in
 * the order their values are checked, each into its field of 'a'; returns
 * how many there are.
 */
static size_t sub_opts(cli_opt *opts, const struct subcommand *sub, qargs *a)
{
    const cli_opt all[NOPTS] = {
        [O_STORE] = CLI_OPT_TEXT("--store", &a->store),
        [O_STORE_FILE] = CLI_OPT_TEXT("--store-file", &a->store_file),
        [O_JSON] = CLI_OPT_FLAG("--json", &a->json),
        [O_DATA] = CLI_OPT_TEXT("--data", &a->data),
        [O_LINES] = CLI_OPT_FLAG("--lines", &a->lines),
        [O_DELAY] = CLI_OPT_DURATION_0("--delay", &a->delay_ms),
        [O_LEASE] = CLI_OPT_DURATION("--lease", &a->job.lease_ms),
        [O_MAX_ATTEMPTS] = CLI_OPT_NUMBER("--max-attempts",
                                          &a->job.max_attempts, 1,
                                          CLI_MAX_ATTEMPTS_MAX),
        [O_BACKOFF] = CLI_OPT_DURATION_0("--backoff", &a->job.backoff_ms),
        [O_LIMIT] = CLI_OPT_NUMBER("--limit", &a->limit, 1, FAILED_LIMIT_MAX),
        [O_MAX] = CLI_OPT_NUMBER("--max", &a->max, 0, SLUICE_MAX_MAX),
        [O_PER] = CLI_OPT_DURATION("--per", &a->per_ms),
    };
    size_t n = 0;

    for (int o = 0; o < NOPTS; o++)
        if (o == O_STORE || o == O_STORE_FILE || o == O_JSON ||
            (sub->takes & BIT(o)))
            opts[n++] = all[o];
    return n;
}

/*
 * Reads all of standard input into 'a->data', up to CLI_PAYLOAD_MAX bytes:
 * one more is an error, so an endless input is not read without end.
 * Returns 0 or an exit status (reported).
 */
static int read_stdin(qargs *a)
{
    size_t len = 0, cap = 0;
    char *buf = NULL;

    while (len <= CLI_PAYLOAD_MAX) {
        size_t got;

        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 4096;
            char *nbuf;

            if (ncap > CLI_PAYLOAD_MAX + 1)
                ncap = CLI_PAYLOAD_MAX + 1;
            if ((nbuf = realloc(buf, ncap)) == NULL) {
                free(buf);
                cli_error("%s: out of memory reading the payload", a->cmd);
                return CLI_EXIT_RUNTIME;
            }
            buf = nbuf;
            cap = ncap;
        }
        if ((got = fread(buf + len, 1, cap - len, stdin)) == 0)
            break;
        len += got;
    }
    if (len > CLI_PAYLOAD_MAX || ferror(stdin)) {
        free(buf);
        if (len > CLI_PAYLOAD_MAX)
            return cli_usage_error("queue", "%s: the payload on stdin is over "
                                   "512 MB, more than a server takes",
                                   a->cmd);
        cli_error("%s: cannot read the payload from stdin: %s", a->cmd,
                  strerror(errno));
        return CLI_EXIT_RUNTIME;
    }
    a->data = a->data_owned = buf;
    a->data_len = len;
    return 0;
}

/*
 * Checks the operands 'pos' (QUEUE, and ID and LEASE if 'sub' takes them)
 * and the options 'opts' (of 'nopts') into 'a'. Returns 0 or CLI_EXIT_USAGE.
 */
static int qargs_check(qargs *a, const struct subcommand *sub,
                       const cli_pos *pos, const cli_opt *opts, size_t nopts)
{
    int st;

    if (pos->n < sub->npos)
        return cli_usage_error("queue", "%s: missing %s", a->cmd,
                               pos_names[pos->n]);
    if ((st = cli_name_check(a->cmd, "QUEUE", pos->args[0])) != 0)
        return st;
    a->queue = pos->args[0];
    a->queue_len = strlen(pos->args[0]);
    if (sub->npos >= 2 && (st = cli_opt_u64(&a->id, "queue", "ID",
                                            pos->args[1], 1, ID_MAX)) != 0)
        return st;
    if (sub->npos >= 3 && (st = cli_opt_u64(&a->lease, "queue", "LEASE",
                                            pos->args[2], 1, ID_MAX)) != 0)
        return st;
    a->job = (cli_job_opts)CLI_JOB_OPTS_INIT;
    a->limit = DEFAULT_FAILED_LIMIT;
    if ((st = cli_opts_check("queue", opts, nopts)) != 0)
        return st;
    if (a->data != NULL)
        a->data_len = strlen(a->data);
    if (a->lines && a->data != NULL)
        return cli_usage_error("queue", "%s: --lines reads the payloads from "
                               "stdin, so it takes no --data", a->cmd);
    if (sub->run == sub_set_cap) {
        if (cli_opt_value(opts, nopts, "--max") == NULL)
            return cli_usage_error("queue", "%s: missing --max (jobs per "
                                   "window, 0 to remove the cap)", a->cmd);
        if (a->max > 0 && cli_opt_value(opts, nopts, "--per") == NULL)
            return cli_usage_error("queue", "%s: missing --per (the window, "
                                   "e.g. --per 1s)", a->cmd);
    }
    return 0;
}

/* The subcommand named 'name', or NULL. */
static const struct subcommand *sub_find(const char *name)
{
    for (size_t i = 0; i < NSUBCOMMANDS; i++)
        if (strcmp(subcommands[i].name, name) == 0)
            return &subcommands[i];
    return NULL;
}

int cli_queue(int argc, char **argv)
{
    const struct subcommand *sub;
    cli_opt opts[NOPTS];
    const char *operands[3];
    cli_pos pos = {.args = operands};
    size_t nopts;
    char cmd[32];
    sluice_store *store = NULL;
    qargs a = {0};
    int st;

    if (argc == 0)
        return cli_usage_error("queue", "queue: missing SUBCOMMAND (add, "
                               "take, complete, fail, retry, failed, stats "
                               "or set-cap)");
    if ((sub = sub_find(argv[0])) == NULL)
        return cli_usage_error("queue", "queue: unknown subcommand '%s' "
                               "(expected add, take, complete, fail, retry, "
                               "failed, stats or set-cap)",
                               cli_shown(argv[0]));
    snprintf(cmd, sizeof(cmd), "queue %s", sub->name);
    a.cmd = cmd;
    nopts = sub_opts(opts, sub, &a);
    pos.max = sub->npos;
    pos.what = sub->npos == 1   ? "QUEUE"
               : sub->npos == 2 ? "QUEUE ID"
                                : "QUEUE ID LEASE";
    if ((st = cli_opts_parse(cmd, argc - 1, argv + 1, opts, nopts, &pos,
                             CLI_CHECK_LATER)) != 0 ||
        (st = qargs_check(&a, sub, &pos, opts, nopts)) != 0 ||
        (st = cli_store_url(&a.store, cmd, a.store_file)) != 0 ||
        (st = cli_store_open(&store, "queue", a.store, CLI_QUEUES_NEED_SERVER,
                             NULL)) != 0)
        return st;
    if (sub->run == sub_add && a.data == NULL && !a.lines &&
        !isatty(STDIN_FILENO) && (st = read_stdin(&a)) != 0) {
        sluice_store_free(store);
        return st;
    }
    st = sub->run(store, &a);
    free(a.data_owned);
    sluice_store_free(store);
    return st;
}

/* '{"queue":"q"' for the start of a JSON object. */
static void json_open(const qargs *a)
{
    fputs("{\"queue\":", stdout);
    cli_json_string(stdout, a->queue, a->queue_len);
}

/*
 * Reports add's failure 'err' and returns its exit status. A payload that
 * the store could not give back to a take (SLUICE_ERANGE) can never be
 * added: a usage error, like a payload over CLI_PAYLOAD_MAX on stdin.
 */
static int add_error(const char *what, int err)
{
    if (err == SLUICE_ERANGE)
        return cli_usage_error("queue", "%s: %s (ERANGE)", what,
                               sluice_last_error());
    return cli_lib_error("queue", what, err);
}

/* ---- add --lines ------------------------------------------------------------ */

/* Lines added by one sluice_queue_add_many() call: one round trip, the
   library's own batch (512 jobs or 32 MB). */
#define LINES_BATCH 512
#define LINES_BATCH_BYTES ((size_t)32 * 1024 * 1024)

/* The batch of lines being read. */
typedef struct lines {
    char *bytes;              /* the payloads, one after the other */
    size_t len, cap;
    size_t ends[LINES_BATCH]; /* where each payload ends in 'bytes' */
    size_t n;                 /* lines in the batch */
    uint64_t first;           /* the line number of the first one */
    sluice_new_job jobs[LINES_BATCH];
} lines;

/*
 * Reads the next line of 'in' (for 'a') into 'b': '*got' is 1 for a line
 * (the last may end without a newline), 0 at the end of the input.
 * Returns 0, or the exit status of a failure (reported): a line over
 * CLI_PAYLOAD_MAX, no memory, a read error.
 */
static int read_line(int *got, lines *b, FILE *in, const qargs *a)
{
    size_t start = b->len;
    int c;

    while ((c = getc_unlocked(in)) != EOF && c != '\n') {
        if (b->len - start >= CLI_PAYLOAD_MAX)
            return cli_usage_error("queue", "%s: line %llu is over 512 MB, "
                                   "more than a server takes", a->cmd,
                                   (unsigned long long)(b->first + b->n));
        if (b->len == b->cap) {
            size_t ncap = b->cap ? 2 * b->cap : 65536;
            char *nbytes = realloc(b->bytes, ncap);

            if (nbytes == NULL) {
                cli_error("%s: out of memory reading the lines", a->cmd);
                return CLI_EXIT_RUNTIME;
            }
            b->bytes = nbytes;
            b->cap = ncap;
        }
        b->bytes[b->len++] = (char)c;
    }
    if (ferror(in)) {
        cli_error("%s: cannot read the lines from stdin: %s", a->cmd,
                  strerror(errno));
        return CLI_EXIT_RUNTIME;
    }
    *got = c != EOF || b->len > start;
    if (*got)
        b->ends[b->n++] = b->len;
    return 0;
}

/*
 * Adds the lines of batch 'b' to the queue and prints the ids of those
 * added ('*printed' counts them, for the commas of JSON); empties the
 * batch. Returns 0, or the exit status of a failure (reported).
 */
static int add_batch(sluice_store *store, const qargs *a, lines *b,
                     uint64_t *printed)
{
    size_t from = 0, added = 0;
    int err;

    for (size_t i = 0; i < b->n; i++) {
        b->jobs[i] = (sluice_new_job){.payload = b->bytes + from,
                                      .payload_len = b->ends[i] - from,
                                      .delay_ms = a->delay_ms};
        from = b->ends[i];
    }
    err = sluice_queue_add_many(store, a->queue, a->queue_len, b->jobs, b->n);
    for (; added < b->n && b->jobs[added].id != 0; added++) {
        unsigned long long id = b->jobs[added].id;

        if (a->json)
            printf("%s%llu", *printed + added > 0 ? "," : "", id);
        else
            printf("%llu\n", id);
    }
    *printed += added;
    fflush(stdout);
    if (err < 0) {
        char what[128];

        snprintf(what, sizeof(what), "%s: not added from line %llu on (job "
                 "0 below is line %llu)", a->cmd,
                 (unsigned long long)(b->first + added),
                 (unsigned long long)b->first);
        return add_error(what, err);
    }
    b->first += b->n;
    b->n = b->len = 0;
    return 0;
}

/* 'queue add --lines': one job per line of stdin, the ids as they come. */
static int add_lines(sluice_store *store, qargs *a)
{
    lines *b = calloc(1, sizeof(*b));
    uint64_t printed = 0;
    int st = 0, got = 1;

    if (b == NULL) {
        cli_error("%s: out of memory", a->cmd);
        return CLI_EXIT_RUNTIME;
    }
    b->first = 1;
    if (a->json) {
        json_open(a);
        fputs(",\"ids\":[", stdout);
    }
    while (st == 0 && got) {
        st = read_line(&got, b, stdin, a);
        if (st == 0 && (b->n == LINES_BATCH || b->len >= LINES_BATCH_BYTES ||
                        (!got && b->n > 0)))
            st = add_batch(store, a, b, &printed);
    }
    if (a->json)
        printf("]}\n");
    free(b->bytes);
    free(b);
    return st;
}

static int sub_add(sluice_store *store, qargs *a)
{
    uint64_t id;
    int err;

    if (a->lines)
        return add_lines(store, a);
    err = sluice_queue_add(&id, store, a->queue, a->queue_len, a->data,
                           a->data_len, a->delay_ms);
    if (err < 0)
        return add_error(a->cmd, err);
    if (a->json) {
        json_open(a);
        printf(",\"id\":%llu}\n", (unsigned long long)id);
    } else {
        printf("%llu\n", (unsigned long long)id);
    }
    return CLI_EXIT_OK;
}

static int sub_take(sluice_store *store, qargs *a)
{
    sluice_take_status status = SLUICE_TAKE_EMPTY;
    sluice_job job = {0};
    uint64_t wait_ms = 0;
    int err = sluice_queue_take(&status, &wait_ms, &job, store, a->queue,
                                a->queue_len, a->job.lease_ms);
    const char *word = status == SLUICE_TAKE_DEFERRED ? "deferred" : "empty";

    if (err < 0)
        return cli_lib_error("queue", a->cmd, err);
    if (status == SLUICE_TAKE_JOB && a->json) {
        json_open(a);
        printf(",\"status\":\"job\",\"id\":%llu,\"attempt\":%llu,"
               "\"lease\":%llu,", (unsigned long long)job.id,
               (unsigned long long)job.attempt, (unsigned long long)job.lease);
        print_payload(job.payload, job.payload_len);
        printf("}\n");
    } else if (status == SLUICE_TAKE_JOB) {
        printf("job %llu attempt %llu lease %llu\n",
               (unsigned long long)job.id, (unsigned long long)job.attempt,
               (unsigned long long)job.lease);
        fwrite(job.payload, 1, job.payload_len, stdout);
        if (job.payload_len > 0 && job.payload[job.payload_len - 1] != '\n')
            putchar('\n');
    } else if (a->json) {
        json_open(a);
        printf(",\"status\":\"%s\",\"wait_ms\":%llu}\n", word,
               (unsigned long long)wait_ms);
    } else if (status == SLUICE_TAKE_EMPTY && wait_ms == 0) {
        printf("empty\n");
    } else {
        printf("%s %llu\n", word, (unsigned long long)wait_ms);
    }
    sluice_job_clear(&job);
    return status == SLUICE_TAKE_JOB ? CLI_EXIT_OK : CLI_EXIT_REFUSED;
}

/* Prints complete's or fail's outcome; 'err' is the call's result. */
static int print_outcome(const qargs *a, int err, const char *outcome)
{
    if (err == SLUICE_ELEASE) {
        cli_error("%s: %s", a->cmd, sluice_last_error());
        outcome = "lost";
    } else if (err < 0) {
        return cli_lib_error("queue", a->cmd, err);
    }
    if (a->json) {
        json_open(a);
        printf(",\"id\":%llu,\"outcome\":\"%s\"}\n", (unsigned long long)a->id,
               outcome);
    } else {
        printf("%s\n", outcome);
    }
    return err == SLUICE_ELEASE ? CLI_EXIT_REFUSED : CLI_EXIT_OK;
}

static int sub_complete(sluice_store *store, qargs *a)
{
    int err = sluice_queue_complete(store, a->queue, a->queue_len, a->id,
                                    a->lease);

    return print_outcome(a, err, "done");
}

static int sub_fail(sluice_store *store, qargs *a)
{
    int dead = 0;
    int err = sluice_queue_fail(&dead, store, a->queue, a->queue_len, a->id,
                                a->lease, a->job.max_attempts,
                                a->job.backoff_ms);

    return print_outcome(a, err, dead ? "failed" : "retrying");
}

static int sub_retry(sluice_store *store, qargs *a)
{
    int retried = 0;
    int err = sluice_queue_retry(&retried, store, a->queue, a->queue_len,
                                 a->id);

    if (err < 0)
        return cli_lib_error("queue", a->cmd, err);
    if (!retried)
        cli_error("%s: job %llu is not a failed job", a->cmd,
                  (unsigned long long)a->id);
    if (a->json) {
        json_open(a);
        printf(",\"id\":%llu,\"retried\":%s}\n", (unsigned long long)a->id,
               retried ? "true" : "false");
    } else if (retried) {
        printf("retried\n");
    }
    return retried ? CLI_EXIT_OK : CLI_EXIT_REFUSED;
}

static int sub_failed(sluice_store *store, qargs *a)
{
    size_t n = (size_t)a->limit;
    uint64_t *ids = malloc(n * sizeof(*ids));
    int err;

    if (ids == NULL) {
        cli_error("%s: out of memory", a->cmd);
        return CLI_EXIT_RUNTIME;
    }
    if ((err = sluice_queue_failed(ids, &n, store, a->queue, a->queue_len))
        < 0) {
        free(ids);
        return cli_lib_error("queue", a->cmd, err);
    }
    if (a->json) {
        json_open(a);
        fputs(",\"failed\":[", stdout);
        for (size_t i = 0; i < n; i++)
            printf("%s%llu", i ? "," : "", (unsigned long long)ids[i]);
        printf("]}\n");
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%llu\n", (unsigned long long)ids[i]);
    }
    free(ids);
    return CLI_EXIT_OK;
}

/* The cap's "max": "none" (JSON null) for no cap (the library's max 0 and
   duration_ms 0), apart from a cap of 0 (max 0 with a duration, written
   by another tool: set-cap --max 0 removes the cap). 'buf' holds 24. */
static const char *cap_max(char *buf, uint64_t max, uint64_t duration_ms,
                           bool json)
{
    if (max == 0 && duration_ms == 0)
        return json ? "null" : "none";
    snprintf(buf, 24, "%llu", (unsigned long long)max);
    return buf;
}

static int sub_stats(sluice_store *store, qargs *a)
{
    /* The same figures in the same order, as JSON or as text. */
    static const char json[] =
        ",\"waiting\":%llu,\"active\":%llu,\"delayed\":%llu,\"failed\":%llu,"
        "\"completed\":%llu,\"max\":%s,\"duration_ms\":%llu,\"count\":%llu,"
        "\"wait_ms\":%llu}\n";
    static const char text[] =
        "waiting=%llu active=%llu delayed=%llu failed=%llu completed=%llu "
        "max=%s duration_ms=%llu count=%llu wait_ms=%llu\n";
    sluice_queue_stats s;
    char max[24];
    int err = sluice_queue_stats_get(&s, store, a->queue, a->queue_len);

    if (err < 0)
        return cli_lib_error("queue", a->cmd, err);
    if (a->json)
        json_open(a);
    printf(a->json ? json : text, (unsigned long long)s.waiting,
           (unsigned long long)s.active, (unsigned long long)s.delayed,
           (unsigned long long)s.failed, (unsigned long long)s.completed,
           cap_max(max, s.max, s.duration_ms, a->json),
           (unsigned long long)s.duration_ms, (unsigned long long)s.count,
           (unsigned long long)s.wait_ms);
    return CLI_EXIT_OK;
}

static int sub_set_cap(sluice_store *store, qargs *a)
{
    uint64_t per = a->max > 0 ? a->per_ms : 0;
    int err = sluice_queue_set_cap(store, a->queue, a->queue_len, a->max, per);

    if (err < 0)
        return cli_lib_error("queue", a->cmd, err);
    if (a->json) {
        char max[24];

        json_open(a);
        printf(",\"max\":%s,\"duration_ms\":%llu}\n",
               cap_max(max, a->max, per, true), (unsigned long long)per);
    } else if (a->max == 0) {
        printf("max=none (not limited)\n");
    } else {
        printf("max=%llu duration_ms=%llu\n", (unsigned long long)a->max,
               (unsigned long long)per);
    }
    return CLI_EXIT_OK;
}
