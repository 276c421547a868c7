/*
 * work.c - 'sluice work': a worker that serves queues until told to stop.
 *
 *   sluice work [QUEUE...] [--pattern GLOB] [--exec CMD] [--lease DUR]
 *               [--count N] [--timeout DUR] [--max-attempts N]
 *               [--backoff DUR] [--json] --store URL
 *
 * Queues live on a server store only: the embedded store (SLUICE_ENOTSUP)
 * is a usage error, exit 2, like a missing --store.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORK_SLICE_MS 250u /* how soon work notices a signal */

const char cli_work_help[] =
    "Usage: sluice work [QUEUE...] [--pattern GLOB] [--exec CMD]\n"
    "                   [--lease DUR] [--count N] [--timeout DUR]\n"
    "                   [--max-attempts N] [--backoff DUR] [--json]\n"
    "                   --store URL\n"
    "\n"
    "Runs a worker: takes jobs from the listed queues and from every queue\n"
    "whose name matches GLOB (e.g. 'chat:*', also those added later), in\n"
    "turn, one job per queue per round; a queue over its cap is skipped until\n"
    "its window resets, so the others keep flowing. With nothing to take it\n"
    "sleeps until a job is added. Any number of workers, in any processes,\n"
    "may serve the same queues: each job goes to one of them, and the caps\n"
    "are shared by all.\n"
    "\n"
    "Each job runs CMD with /bin/sh -c, the payload on its standard input\n"
    "and SLUICE_QUEUE, SLUICE_JOB_ID and SLUICE_ATTEMPT in its environment;\n"
    "CMD's standard output goes to standard error, so that sluice's own\n"
    "output stays one line per job. Exit status 0 completes the job; any\n"
    "other fails it, and it is retried after the back-off until it has been\n"
    "taken N times, then moved to the failed set ('sluice queue failed').\n"
    "Without --exec each job is completed at once.\n"
    "\n"
    "Prints one line per job: 'QUEUE ID done|retrying|failed|lost' ('lost':\n"
    "the lease ran out before CMD finished; the job went back to wait). In\n"
    "QUEUE, spaces, control bytes and bytes that are not UTF-8 are written\n"
    "\\xNN.\n"
    "\n"
    "  --pattern GLOB     also serve the queues matching GLOB (fnmatch); one\n"
    "                     that is not a glob (an unclosed '[') is a usage\n"
    "                     error\n"
    "  --exec CMD         the command run for each job\n"
    "  --lease DUR        how long a job is this worker's (default @LEASE@); a\n"
    "                     job still running then may go to another worker\n"
    "  --count N          stop after N jobs (each attempt counts)\n"
    "  --timeout DUR      stop after DUR with no job to do\n"
    "  --max-attempts N   times a job is taken before it fails for good\n"
    "                     (default 3)\n"
    "  --backoff DUR      wait before a retry, doubled at each attempt\n"
    "                     (default 1s; 0 for at once)\n"
    "  --json             one JSON object per job: {\"queue\",\"id\",\n"
    "                     \"attempt\",\"outcome\"}\n"
    "  --store URL        valkey://HOST[:PORT][?OPTIONS] (required)\n"
    "\n"
    "SIGINT or SIGTERM stops the worker once the current job is finished (a\n"
    "second signal passes SIGTERM to CMD).\n"
    "\n"
    "Exit status: 0 stopped as asked (--count, --timeout or a signal),\n"
    "2 usage error, or a store without queues, 3 store error.\n";

/* ---- Running CMD ----------------------------------------------------------- */

/* Set by the signal handler; read by the loop between jobs. */
static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t signals_seen;
static volatile sig_atomic_t running_pid; /* CMD's process group, or 0 */

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    /* A second signal while CMD runs asks CMD to stop too. */
    if (++signals_seen > 1 && running_pid > 0)
        kill(-(pid_t)running_pid, SIGTERM);
}

/*
 * Runs 'cmd' for 'job' of 'queue' and answers its exit status (non-zero
 * when it was killed or could not be run), or -1 when it could not be
 * started (reported). The payload is given through an unlinked temporary
 * file rather than a pipe, so a command that does not read it cannot
 * block the worker.
 */
static int run_command(const char *cmd, const char *queue,
                       const sluice_job *job)
{
    FILE *in = tmpfile();
    char id[24], attempt[24];
    int wstatus;
    pid_t pid;

    if (in == NULL ||
        fwrite(job->payload, 1, job->payload_len, in) != job->payload_len ||
        fflush(in) != 0 || fseek(in, 0, SEEK_SET) != 0) {
        cli_error("work: cannot hold the payload in a temporary file: %s",
                  strerror(errno));
        if (in != NULL)
            fclose(in);
        return -1;
    }
    snprintf(id, sizeof(id), "%llu", (unsigned long long)job->id);
    snprintf(attempt, sizeof(attempt), "%llu", (unsigned long long)job->attempt);
    fflush(stdout);
    fflush(stderr);
    if ((pid = fork()) < 0) {
        cli_error("work: cannot start a process: %s", strerror(errno));
        fclose(in);
        return -1;
    }
    if (pid == 0) {
        /* Its own process group: a Ctrl-C meant for the worker lets the
           job finish. */
        setpgid(0, 0);
        if (dup2(fileno(in), STDIN_FILENO) < 0 ||
            dup2(STDERR_FILENO, STDOUT_FILENO) < 0 ||
            setenv("SLUICE_QUEUE", queue, 1) != 0 ||
            setenv("SLUICE_JOB_ID", id, 1) != 0 ||
            setenv("SLUICE_ATTEMPT", attempt, 1) != 0)
            _exit(126);
        fclose(in);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists before a signal */
    running_pid = pid;
    fclose(in);
    while (waitpid(pid, &wstatus, 0) < 0) {
        if (errno != EINTR) {
            running_pid = 0;
            cli_error("work: cannot wait for the command: %s",
                      strerror(errno));
            return -1;
        }
    }
    running_pid = 0;
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    return 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
}

/* ---- The worker ------------------------------------------------------------ */

/* The checked options of work. */
typedef struct wargs {
    const char *store, *pattern, *exec;
    bool json;
    cli_job_opts job; /* --lease, --max-attempts, --backoff */
    uint64_t count, timeout_ms;
} wargs;

/* One line for one job. */
static void print_job(const wargs *a, const char *queue, const sluice_job *job,
                      const char *outcome)
{
    if (a->json) {
        fputs("{\"queue\":", stdout);
        cli_json_string(stdout, queue, strlen(queue));
        printf(",\"id\":%llu,\"attempt\":%llu,\"outcome\":\"%s\"}\n",
               (unsigned long long)job->id, (unsigned long long)job->attempt,
               outcome);
    } else {
        cli_put_safe(stdout, queue, strlen(queue), true);
        printf(" %llu %s\n", (unsigned long long)job->id, outcome);
    }
    fflush(stdout);
}

/*
 * Does one job: runs the command (or nothing) and completes or fails the
 * job. Returns 0, or the exit status of a failure (reported).
 */
static int work_one(const wargs *a, sluice_store *store, const char *queue,
                    const sluice_job *job)
{
    const char *outcome = "done";
    int dead = 0, err, code = 0;

    if (a->exec != NULL && (code = run_command(a->exec, queue, job)) < 0)
        return CLI_EXIT_RUNTIME; /* the lease runs out; the job comes back */
    if (code == 0) {
        err = sluice_queue_complete(store, queue, strlen(queue), job->id,
                                    job->lease);
    } else {
        err = sluice_queue_fail(&dead, store, queue, strlen(queue), job->id,
                                job->lease, a->job.max_attempts,
                                a->job.backoff_ms);
        outcome = dead ? "failed" : "retrying";
    }
    if (err == SLUICE_ELEASE)
        outcome = "lost";
    else if (err < 0)
        return cli_lib_error("work", "work", err);
    print_job(a, queue, job, outcome);
    return 0;
}

/* Takes and does jobs until told to stop; returns the exit status. */
static int work_loop(const wargs *a, sluice_store *store, sluice_worker *w)
{
    uint64_t done = 0, idle_since = cli_mono_ms();
    sluice_job job = {0};
    int st = CLI_EXIT_OK;

    while (!stop_signal && (a->count == 0 || done < a->count)) {
        uint64_t slice = WORK_SLICE_MS, idle = cli_mono_ms() - idle_since;
        const char *queue;
        int err;

        if (a->timeout_ms > 0) {
            if (idle >= a->timeout_ms)
                break;
            if (a->timeout_ms - idle < slice)
                slice = a->timeout_ms - idle;
        }
        if ((err = sluice_worker_next(&job, &queue, NULL, w, slice)) < 0) {
            st = cli_lib_error("work", "work", err);
            break;
        }
        if (job.id == 0)
            continue;
        st = work_one(a, store, queue, &job);
        sluice_job_clear(&job);
        if (st != 0)
            break;
        done++;
        idle_since = cli_mono_ms();
    }
    sluice_job_clear(&job);
    return st;
}

/* ---- The command ----------------------------------------------------------- */

/*
 * Parses and checks the 'argc' arguments 'argv' of work into 'a' and the
 * queues named, 'queues' (whose 'args' has room for 'argc'). Returns 0 or
 * CLI_EXIT_USAGE (reported).
 */
static int work_args(wargs *a, cli_pos *queues, int argc, char **argv)
{
    cli_opt opts[] = {
        CLI_OPT_TEXT("--store", &a->store),
        CLI_OPT_FLAG("--json", &a->json),
        CLI_OPT_TEXT("--pattern", &a->pattern),
        CLI_OPT_TEXT("--exec", &a->exec),
        CLI_OPT_DURATION("--lease", &a->job.lease_ms),
        CLI_OPT_NUMBER("--count", &a->count, 1, UINT64_MAX),
        CLI_OPT_DURATION("--timeout", &a->timeout_ms),
        CLI_OPT_NUMBER("--max-attempts", &a->job.max_attempts, 1,
                       CLI_MAX_ATTEMPTS_MAX),
        CLI_OPT_DURATION_0("--backoff", &a->job.backoff_ms),
    };
    size_t nopts = sizeof(opts) / sizeof(opts[0]);
    int st;

    a->job = (cli_job_opts)CLI_JOB_OPTS_INIT;
    if ((st = cli_opts_parse("work", argc, argv, opts, nopts, queues,
                             CLI_CHECK_LATER)) != 0 ||
        (st = cli_opts_check("work", opts, nopts)) != 0)
        return st;
    for (size_t i = 0; i < queues->n; i++) {
        char what[32];

        snprintf(what, sizeof(what), "QUEUE %zu", i + 1);
        if ((st = cli_name_check("work", what, queues->args[i])) != 0)
            return st;
    }
    if (queues->n == 0 && a->pattern == NULL)
        return cli_usage_error("work", "work: missing QUEUE or --pattern "
                               "(the queues to serve)");
    if (a->pattern != NULL && a->pattern[0] == '\0')
        return cli_usage_error("work", "work: --pattern is empty");
    if (a->exec != NULL && a->exec[0] == '\0')
        return cli_usage_error("work", "work: --exec is empty");
    return 0;
}

/*
 * Serves jobs with worker 'w' on 'store' until told to stop, SIGINT and
 * SIGTERM included; returns the exit status.
 */
static int serve(const wargs *a, sluice_store *store, sluice_worker *w)
{
    struct sigaction sa, old_int, old_term;
    int st;

    /* No SA_RESTART: a signal cuts a sleep short. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    st = work_loop(a, store, w);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return st;
}

int cli_work(int argc, char **argv)
{
    sluice_worker_opts wopts = SLUICE_WORKER_OPTS_INIT;
    sluice_store *store = NULL;
    sluice_worker *w = NULL;
    wargs a = {0};
    cli_pos queues = {.max = (size_t)argc, .what = "QUEUE..."};
    int st, err;

    if ((queues.args = malloc(((size_t)argc + 1) * sizeof(char *))) == NULL) {
        cli_error("work: out of memory");
        return CLI_EXIT_RUNTIME;
    }
    if ((st = work_args(&a, &queues, argc, argv)) != 0 ||
        (st = cli_store_open(&store, "work", a.store, CLI_QUEUES_NEED_SERVER,
                             NULL)) != 0) {
        free(queues.args);
        return st;
    }
    wopts.lease_ms = a.job.lease_ms;
    wopts.pattern = a.pattern;
    err = sluice_worker_new(&w, store, queues.args, NULL, queues.n, &wopts);
    free(queues.args);
    if (err == SLUICE_EINVAL) /* the arguments: a pattern that is none */
        st = cli_usage_error("work", "work: %s%s (EINVAL)",
                             a.pattern != NULL ? "--pattern: " : "",
                             sluice_last_error());
    else if (err < 0)
        st = cli_lib_error("work", "work", err);
    if (err < 0) {
        sluice_store_free(store);
        return st;
    }
    st = serve(&a, store, w);
    sluice_worker_free(w);
    sluice_store_free(store);
    return st;
}
