/*
 * test_work_sentinel.c - `sluice work` rides out a Sentinel failover: the
 * CLI's worker serves a queue through valkey+sentinel://, while the master
 * is first failed over (SENTINEL FAILOVER) and then killed, and never
 * exits; every job is done, and a job done twice is one the worker said
 * was lost or retried, or one whose completion was a write the failover
 * lost (printed, not failed).
 *
 * The setup is the launcher's (server.h, "Sentinel"): a master, its
 * replica and one redis-sentinel. The worker is the built CLI (its path
 * given by the build, or as argv[1]), run as
 *   sluice work work --exec CMD --concurrency 4 --lease 2s ...
 * where CMD appends "PAYLOAD ID ATTEMPT" to a file of runs and sleeps
 * 20 ms. Each payload is unique ("p-00042"), so a run is known by it
 * whatever id a job has. Jobs are added only while nothing fails over, and
 * each batch waits until the replica has it (rs_wait_replicated(); WAIT
 * would not do, as the test's connection made none of the writes), so no
 * add is a write a failover can lose; a completion can be (replication is
 * asynchronous, and the old master takes writes until it is demoted).
 *
 * The run:
 *   1. 300 jobs, the worker started, 50 runs seen;
 *   2. SENTINEL FAILOVER (and the old master back as a replica), the
 *      queue topped up meanwhile, until Sentinel would fail over again
 *      (RS_SENTINEL_FAILOVER_GAP_MS after the first);
 *   3. the master killed (SIGKILL), until the sentinel names the other;
 *   4. 50 more jobs added on the new master, and everything run.
 * Checked: every payload ran and its job has a 'done' line; a payload run
 * twice either has a 'lost' or 'retrying' line, or its first run began in
 * a failover's window (from its start to its end, and CONCURRENCY runs
 * before: those were running when it began); no job failed; the worker is
 * still running at the end and stops on SIGTERM with status 0. Printed:
 * for each failover, how long no job started, and the outages the worker
 * reported ("the store answers again after N ms"), and what was lost.
 * About 15 s in all.
 */
#include "server.h"
#include "sluice.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SLUICE_CLI_BINARY
#define SLUICE_CLI_BINARY "sluice"
#endif

#define QUEUE "work"
#define MAX_JOBS 4000
#define CONCURRENCY 4
#define POLL_MS 5
/* How long the whole run may take, and the drain at its end. */
#define RUN_BOUND_MS 60000
#define DRAIN_BOUND_MS 20000
/* The queue is topped up to this many jobs not yet run, between failovers. */
#define BACKLOG 200

/* ---- What the worker did ------------------------------------------------- */

/* The runs file as read so far, and each payload's runs. */
typedef struct runs {
    char path[300];
    long offset;              /* bytes of the file read */
    long lines;               /* complete lines read */
    unsigned count[MAX_JOBS]; /* runs of payload i */
    long first_line[MAX_JOBS];
    uint64_t id[MAX_JOBS];    /* the job that ran it */
    size_t distinct;          /* payloads run at least once */
    uint64_t last_ms;         /* when the last new line was seen */
} runs;

/* A failover: what happened meanwhile. */
typedef struct event {
    const char *what;
    long line_from, line_to;  /* runs read at its start and at its end */
    uint64_t t_from_ms, t_to_ms;
    uint64_t pause_ms;        /* the longest time no job started */
    int recording;            /* still measuring 'pause_ms' */
    atomic_int done;          /* set by its thread */
    int rc;                   /* its thread's result: 0 or -1 */
    rs_sentinel *st;
} event;

static runs R;
static event *current;
static char payloads[MAX_JOBS][12];
static size_t added;

/* Reads the runs file's new complete lines into R (and 'current''s pause). */
static void read_runs(void)
{
    char line[128];
    FILE *f = fopen(R.path, "r");
    uint64_t now = rs_mono_ms();
    long before = R.lines;

    if (f == NULL)
        return;
    if (fseek(f, R.offset, SEEK_SET) == 0) {
        while (fgets(line, sizeof(line), f) != NULL) {
            size_t len = strlen(line);
            unsigned idx, attempt;
            uint64_t id;

            if (len == 0 || line[len - 1] != '\n')
                break; /* a line being written: read it next time */
            R.offset += (long)len;
            if (!CHECK(sscanf(line, "p-%u %" SCNu64 " %u", &idx, &id,
                              &attempt) == 3 && idx < added)) {
                fprintf(stderr, "    a run line of no job of ours: %s", line);
                continue;
            }
            if (R.count[idx]++ == 0) {
                R.first_line[idx] = R.lines;
                R.distinct++;
            }
            R.id[idx] = id;
            R.lines++;
        }
    }
    fclose(f);
    if (R.lines == before)
        return;
    if (current != NULL && current->recording) {
        if (now - R.last_ms > current->pause_ms)
            current->pause_ms = now - R.last_ms;
        /* The first job started after the failover ends the pause. */
        if (atomic_load(&current->done))
            current->recording = 0;
    }
    R.last_ms = now;
}

/* Reads the runs every POLL_MS for 'ms', or until 'stop' is set. */
static void pump(uint64_t ms, atomic_int *stop)
{
    uint64_t until = rs_mono_ms() + ms;

    while (rs_mono_ms() < until && (stop == NULL || !atomic_load(stop))) {
        read_runs();
        rs_sleep_ms(POLL_MS);
    }
    read_runs();
}

/* ---- Adding jobs --------------------------------------------------------- */

/*
 * sluice_queue_add_many() of 'jobs', asked again while it meets an outage,
 * for up to 5 s: the first call after a failover fails (a READONLY reply,
 * or the old master gone) and the next asks the sentinel again (docs/stores.md,
 * "Sentinel"). Neither was a write the server made, so nothing is added
 * twice. Its last status.
 */
static int add_retrying(sluice_store *store, sluice_new_job *jobs, size_t n)
{
    uint64_t until = rs_mono_ms() + 5000;
    int rc;

    while ((rc = sluice_queue_add_many(store, QUEUE, strlen(QUEUE), jobs,
                                       n)) == SLUICE_ECONN &&
           rs_mono_ms() < until) {
        printf("  an add met the failover (%s); again\n",
               sluice_last_error());
        rs_sleep_ms(50);
    }
    return rc;
}

/*
 * Adds 'n' jobs with the next payloads, in one call, and with 'durable'
 * waits until the replica has them (rs_wait_replicated()), so that no
 * failover can lose them. 0, or -1 (a failed check).
 */
static int add_jobs(sluice_store *store, rs_sentinel *st, size_t n,
                    int durable)
{
    sluice_new_job jobs[BACKLOG + 100];

    if (!CHECK(n <= sizeof(jobs) / sizeof(jobs[0]) && added + n <= MAX_JOBS))
        return -1;
    for (size_t i = 0; i < n; i++) {
        snprintf(payloads[added + i], sizeof(payloads[0]), "p-%05zu",
                 added + i);
        jobs[i] = (sluice_new_job){payloads[added + i], 7, 0, 0};
    }
    if (!CHECK_OK(add_retrying(store, jobs, n)))
        return -1;
    added += n;
    if (!durable || rs_sentinel_master(st) == NULL)
        return durable ? -1 : 0;
    return CHECK(rs_wait_replicated(rs_sentinel_master(st), 1, 5000) == 0)
               ? 0
               : -1;
}

/* Tops the jobs not yet run up to BACKLOG when fewer than half are left. */
static void top_up(sluice_store *store, rs_sentinel *st)
{
    size_t left = added - R.distinct;

    if (left < BACKLOG / 2)
        add_jobs(store, st, BACKLOG - left, 1);
}

/* ---- The worker ---------------------------------------------------------- */

/*
 * Starts `sluice work` ('cli') on 'url', its stdout in 'dir'/out and its
 * stderr in 'dir'/err, killed by the kernel should this program die. The
 * PID, or -1.
 */
static pid_t start_worker(const char *cli, const char *url, const char *dir)
{
    char cmd[512], out[300], err[300];
    const char *argv[] = {cli, "work", QUEUE, "--exec", cmd,
                          "--concurrency", "4", "--lease", "2s",
                          "--backoff", "0", "--max-attempts", "20",
                          "--stalled-limit", "20", "--store", url, NULL};
    pid_t pid;

    snprintf(cmd, sizeof(cmd),
             "p=$(cat); echo \"$p $SLUICE_JOB_ID $SLUICE_ATTEMPT\" >> '%s'; "
             "sleep 0.02", R.path);
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        rs_close_inherited();
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0)
        perror("test_work_sentinel: fork");
    return pid;
}

/* Set once the worker has exited (and been reaped). */
static int worker_gone;

/* True while the worker runs; else prints how it ended, once. */
static int worker_alive(pid_t pid)
{
    int status;

    if (worker_gone)
        return 0;
    if (waitpid(pid, &status, WNOHANG) == 0)
        return 1;
    worker_gone = 1;
    fprintf(stderr, "    the worker exited (status 0x%x)\n", status);
    return 0;
}

/* Stops the worker with SIGTERM; its exit status, or -1 if it had to be
   killed after 10 s or had exited already. */
static int stop_worker(pid_t pid)
{
    uint64_t until = rs_mono_ms() + 10000;
    int status;

    if (worker_gone)
        return -1;
    kill(pid, SIGTERM);
    while (rs_mono_ms() < until) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        rs_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* ---- The failovers ------------------------------------------------------- */

static void *graceful(void *arg)
{
    event *e = arg;

    e->rc = rs_sentinel_failover(e->st) < 0 ? -1 : 0;
    atomic_store(&e->done, 1);
    return NULL;
}

static void *crash(void *arg)
{
    event *e = arg;
    rs_server *m = rs_sentinel_master(e->st);
    rs_server *next = m == &e->st->nodes[0] ? &e->st->nodes[1]
                                            : &e->st->nodes[0];

    e->rc = -1;
    if (m != NULL) {
        rs_sentinel_kill(e->st, m);
        e->rc = rs_sentinel_wait_master(e->st, next->port, 20000);
    }
    atomic_store(&e->done, 1);
    return NULL;
}

/*
 * Runs 'fn' (one of the above) on a thread while the runs are read, and
 * notes the event's window and the pause it caused. 0, or -1 if it failed.
 */
static int run_event(event *e, void *(*fn)(void *), rs_sentinel *st)
{
    pthread_t t;
    uint64_t until;

    e->st = st;
    atomic_store(&e->done, 0);
    read_runs();
    e->line_from = R.lines;
    e->t_from_ms = R.last_ms = rs_mono_ms();
    e->recording = 1;
    current = e;
    if (pthread_create(&t, NULL, fn, e) != 0)
        return -1;
    pump(RUN_BOUND_MS, &e->done);
    pthread_join(t, NULL);
    e->line_to = R.lines;
    e->t_to_ms = rs_mono_ms();
    /* Until jobs start again (the pause ends), at most 10 s. */
    until = e->t_to_ms + 10000;
    while (e->recording && rs_mono_ms() < until)
        pump(POLL_MS, NULL);
    printf("  %s: %" PRIu64 " ms; no job started for %" PRIu64 " ms%s\n",
           e->what, e->t_to_ms - e->t_from_ms, e->pause_ms,
           e->recording ? " (and still none)" : "");
    current = NULL;
    return CHECK(e->rc == 0 && !e->recording) ? 0 : -1;
}

/* ---- The checks ---------------------------------------------------------- */

/* The worker's outcome lines: per job id, which outcomes it printed. */
enum { DONE = 1, LOST = 2, RETRYING = 4, FAILED = 8 };
static unsigned char said[MAX_JOBS + 1];

/* Reads 'dir'/out ("work ID done|retrying|failed|lost") into 'said'. */
static void read_outcomes(const char *dir)
{
    char path[300], line[128], q[64], what[16];
    FILE *f;
    uint64_t id;

    snprintf(path, sizeof(path), "%s/out", dir);
    if (!CHECK((f = fopen(path, "r")) != NULL))
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (!CHECK(sscanf(line, "%63s %" SCNu64 " %15s", q, &id, what) == 3 &&
                   strcmp(q, QUEUE) == 0 && id <= MAX_JOBS)) {
            fprintf(stderr, "    a worker line: %s", line);
            continue;
        }
        said[id] |= strcmp(what, "done") == 0       ? DONE
                    : strcmp(what, "lost") == 0     ? LOST
                    : strcmp(what, "retrying") == 0 ? RETRYING
                                                    : FAILED;
    }
    fclose(f);
}

/* Prints the worker's outage lines from 'dir'/err; how many it had. */
static int print_outages(const char *dir)
{
    char path[300], line[512];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "%s/err", dir);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "unreachable") != NULL)
            n++;
        if (strstr(line, "unreachable") != NULL ||
            strstr(line, "answers again") != NULL)
            printf("  worker: %s", line);
    }
    fclose(f);
    if (n == 0)
        printf("  worker: the store never seemed unreachable to it\n");
    return n;
}

/* True when a run that began at line 'line' began in an event's window. */
static int in_window(const event *ev, size_t nev, long line)
{
    for (size_t i = 0; i < nev; i++)
        if (line >= ev[i].line_from - CONCURRENCY && line <= ev[i].line_to)
            return 1;
    return 0;
}

/* Every payload ran and was done; each payload run twice is explained. */
static void check_runs(const event *ev, size_t nev)
{
    size_t missing = 0, reported = 0, lost_writes = 0, unexplained = 0;

    for (size_t i = 0; i < added; i++) {
        uint64_t id = R.id[i];

        if (R.count[i] == 0) {
            if (missing++ < 10)
                fprintf(stderr, "    %s never ran\n", payloads[i]);
            continue;
        }
        if (!CHECK(id <= MAX_JOBS && (said[id] & DONE)))
            fprintf(stderr, "    %s (job %" PRIu64 ") has no 'done'\n",
                    payloads[i], id);
        CHECK(id > MAX_JOBS || !(said[id] & FAILED));
        if (R.count[i] == 1)
            continue;
        if (id <= MAX_JOBS && (said[id] & (LOST | RETRYING))) {
            reported++;
        } else if (in_window(ev, nev, R.first_line[i])) {
            printf("  lost in a failover: job %" PRIu64 " (%s) done, its "
                   "completion lost, run %u times\n", id, payloads[i],
                   R.count[i]);
            lost_writes++;
        } else {
            fprintf(stderr, "    %s (job %" PRIu64 ") ran %u times, first at "
                    "run %ld, outside any failover\n", payloads[i], id,
                    R.count[i], R.first_line[i]);
            unexplained++;
        }
    }
    CHECK_EQ_U64(missing, 0);
    CHECK_EQ_U64(unexplained, 0);
    printf("  %zu jobs, %ld runs: %zu run again after 'lost' or 'retrying', "
           "%zu run again after a completion the failover lost\n",
           added, R.lines, reported, lost_writes);
}

/* ---- The run ------------------------------------------------------------- */

/* Steps 2 and 3: the failovers, the queue topped up between them. */
static void failovers(sluice_store *store, rs_sentinel *st, event *ev,
                      pid_t worker)
{
    test_context("SENTINEL FAILOVER");
    run_event(&ev[0], graceful, st);
    CHECK(worker_alive(worker));
    /* Sentinel fails over again only after the gap; serve meanwhile. */
    test_context("between the failovers");
    while (rs_mono_ms() < ev[0].t_from_ms + RS_SENTINEL_FAILOVER_GAP_MS + 500) {
        top_up(store, st);
        pump(100, NULL);
    }
    if (added - R.distinct < BACKLOG / 2)
        add_jobs(store, st, BACKLOG, 1);
    CHECK(worker_alive(worker));
    test_context("the master killed");
    run_event(&ev[1], crash, st);
    CHECK(worker_alive(worker));
}

/* Step 4: 50 jobs more on the new master, and everything run. */
static void drain(sluice_store *store, rs_sentinel *st, pid_t worker)
{
    sluice_queue_stats s;
    uint64_t until = rs_mono_ms() + DRAIN_BOUND_MS;

    test_context("after the failovers");
    add_jobs(store, st, 50, 0); /* no replica now: nothing to wait for */
    memset(&s, 0, sizeof(s));
    while (rs_mono_ms() < until && worker_alive(worker)) {
        pump(50, NULL);
        if (R.distinct == added &&
            sluice_queue_stats_get(&s, store, QUEUE, strlen(QUEUE)) == 0 &&
            s.waiting == 0 && s.active == 0 && s.delayed == 0)
            break;
    }
    CHECK_EQ_U64(R.distinct, added);
    CHECK_OK(sluice_queue_stats_get(&s, store, QUEUE, strlen(QUEUE)));
    CHECK_EQ_U64(s.waiting + s.active + s.delayed, 0);
    CHECK_EQ_U64(s.failed, 0);
    CHECK(worker_alive(worker));
}

int main(int argc, char **argv)
{
    const char *cli = argc > 1 ? argv[1] : SLUICE_CLI_BINARY;
    const char *tmp = getenv("TMPDIR");
    char dir[256], url[160];
    uint64_t t0 = rs_mono_ms(), t_add;
    event ev[2] = {{.what = "SENTINEL FAILOVER"},
                   {.what = "the master killed, the replica promoted"}};
    sluice_store *store = NULL;
    rs_sentinel st;
    pid_t worker;

    snprintf(dir, sizeof(dir), "%s/sluice-work-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (access(cli, X_OK) != 0 || mkdtemp(dir) == NULL) {
        fprintf(stderr, "test_work_sentinel: %s: %s\n",
                access(cli, X_OK) != 0 ? cli : dir, strerror(errno));
        return 1;
    }
    snprintf(R.path, sizeof(R.path), "%s/runs", dir);
    if (rs_sentinel_start(&st, NULL, NULL) < 0)
        return 1;
    snprintf(url, sizeof(url), "%s?timeout=2000", st.url);
    printf("test_work_sentinel: %s work over %s\n", cli, url);
    if (!CHECK_OK(sluice_store_open(&store, url, NULL)))
        return 1;
    t_add = rs_mono_ms();
    if (add_jobs(store, &st, 300, 1) < 0)
        return 1;
    /* A replica just synced is sent the stream only from its next ACK, up
       to a second on: the jobs are on it only after that. */
    printf("  the first 300 jobs added, and on the replica, in %" PRIu64
           " ms\n", rs_mono_ms() - t_add);
    if ((worker = start_worker(cli, url, dir)) < 0)
        return 1;

    test_context("before the failovers");
    while (R.lines < 50 && rs_mono_ms() < t0 + 20000)
        pump(POLL_MS, NULL);
    CHECK(R.lines >= 50 && worker_alive(worker));
    failovers(store, &st, ev, worker);
    drain(store, &st, worker);

    test_context("the results");
    CHECK_EQ_U64(stop_worker(worker), 0);
    read_outcomes(dir);
    check_runs(ev, 2);
    print_outages(dir);
    test_context(NULL);
    sluice_store_free(store);
    rs_sentinel_stop(&st);
    rs_remove_tree(dir);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_work_sentinel");
}
