/*
 * work.c - 'sluice work': a worker that serves queues until told to stop.
 *
 *   sluice work [QUEUE...] [--pattern GLOB] [--exec CMD] [--concurrency N]
 *               [--lease DUR] [--stalled-limit N] [--count N]
 *               [--timeout DUR] [--give-up-after DUR] [--max-attempts N]
 *               [--backoff DUR] [--verbose] [--json] --store URL
 *
 * One process, one event loop, one sluice_worker (which is not
 * thread-safe): it takes jobs while fewer than --concurrency commands run,
 * and meanwhile waits on those commands (work_run.c) with a time-out, so
 * that it renews each job's lease every third of it.
 *
 * A store that cannot answer (SLUICE_ECONN, SLUICE_ETIMEDOUT: an outage,
 * such as a server restarting) is ridden out: one line on stderr when it
 * starts, the store asked again with a back-off, one line when it answers
 * again. A complete or fail it did not answer is kept and settled then
 * (settle_all()): made again, and told apart by where the job is when its
 * lease is no longer held, so that a complete applied whose reply was lost
 * is 'done', never 'lost'. Any other failure of the store stops the
 * worker, exit 3.
 *
 * Queues live on a server store only: the embedded store (SLUICE_ENOTSUP)
 * is a usage error, exit 2, like a missing --store.
 */
#include "work.h"

#include <stdlib.h>
#include <string.h>

#define WORK_SLICE_MS 250u  /* how soon an idle worker notices a signal */
#define WORK_BUSY_MS 50u    /* how soon a take notices a command's end */
#define BACKOFF_MIN_MS 100u /* the first wait before asking again ... */
#define BACKOFF_MAX_MS 5000u /* ... doubled up to this */
#define VERBOSE_HANDLER "sluice work --verbose"

const char cli_work_help[] =
    "Usage: sluice work [QUEUE...] [--pattern GLOB] [--exec CMD]\n"
    "                   [--concurrency N] [--lease DUR] [--stalled-limit N]\n"
    "                   [--count N] [--timeout DUR] [--give-up-after DUR]\n"
    "                   [--max-attempts N] [--backoff DUR] [--verbose]\n"
    "                   [--json] --store URL | --store-file PATH\n"
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
    "While CMD runs, the job's lease is renewed every third of the lease, so\n"
    "a job may take longer than its lease. Without --exec each job is\n"
    "completed at once.\n"
    "\n"
    "Prints one line per job: 'QUEUE ID done|retrying|failed|lost|unknown'\n"
    "('lost': the lease was lost before CMD finished, and the job goes back\n"
    "to wait when its lease ends, if it has not already). In QUEUE, spaces,\n"
    "control bytes and bytes that are not UTF-8 are written \\xNN.\n"
    "\n"
    "A complete or fail that the store did not answer (it was down, or its\n"
    "reply was lost) may have been applied or not. Its line waits until the\n"
    "store answers; the call is then made again (its lease makes it count\n"
    "once), and if the lease is no longer held, where the job is tells what\n"
    "happened: 'done' when it was completed (a line on stderr says that the\n"
    "reply was lost), 'retrying' or 'failed' for a fail that was applied,\n"
    "else 'lost'. 'unknown': the worker stopped before the store answered\n"
    "again (exit 3); such a job is done, or comes back when its lease ends.\n"
    "\n"
    "When the store cannot be reached (its server is down or restarting),\n"
    "the worker says so on stderr, lets running commands go on, asks again\n"
    "after 100 ms, then twice as long each time up to 5 s, and says so again\n"
    "when the store answers, and serves on (--count waits for the jobs'\n"
    "outcomes to be recorded). Any other store error stops it.\n"
    "\n"
    "  --pattern GLOB     also serve the queues matching GLOB (fnmatch); one\n"
    "                     that is not a glob (an unclosed '[') is a usage\n"
    "                     error\n"
    "  --exec CMD         the command run for each job\n"
    "  --concurrency N    run up to N jobs at once (default 1, at most 256)\n"
    "  --lease DUR        how long a job is this worker's unless renewed\n"
    "                     (default @LEASE@); should the worker die, its job\n"
    "                     goes to another worker then\n"
    "  --stalled-limit N  times a job's lease may run out (its worker died\n"
    "                     or stalled) before the job fails for good\n"
    "                     (default 1)\n"
    "  --count N          stop after N jobs (each attempt counts)\n"
    "  --timeout DUR      stop after DUR with no job to do (exit 3 if the\n"
    "                     store is unreachable then)\n"
    "  --give-up-after DUR  exit 3 once the store has been unreachable for\n"
    "                     DUR (default: never)\n"
    "  --max-attempts N   times a job is taken before it fails for good\n"
    "                     (default 3)\n"
    "  --backoff DUR      wait before a retry, doubled at each attempt\n"
    "                     (default 1s; 0 for at once)\n"
    "  --verbose          a line on stderr each time a queue's cap defers a\n"
    "                     take: 'sluice: work: QUEUE deferred: wait MS ms\n"
    "                     (cap MAX)'\n"
    "  --json             one JSON object per job: {\"queue\",\"id\",\n"
    "                     \"attempt\",\"outcome\"}\n"
    "  --store URL        valkey://HOST[:PORT][?OPTIONS] (required)\n"
    "  --store-file PATH  the URL from the first line of file PATH, which\n"
    "                     only its owner may read (chmod 600), so that no\n"
    "                     password shows in 'ps'; with neither option,\n"
    "                     $SLUICE_STORE\n"
    "\n"
    "SIGINT or SIGTERM stops the worker once the running jobs are finished\n"
    "(a second signal passes SIGTERM to their commands).\n"
    "\n"
    "Exit status: 0 stopped as asked (--count, --timeout or a signal),\n"
    "2 usage error, or a store without queues, 3 store error (one that is\n"
    "not an outage, an outage past --give-up-after, or still on at\n"
    "--timeout).\n";

/* ---- The worker's state ---------------------------------------------------- */

/* The checked options of work. */
typedef struct wargs {
    const char *store, *store_file, *pattern, *exec;
    bool json, verbose;
    cli_job_opts job; /* --lease, --max-attempts, --backoff */
    uint64_t count, timeout_ms, give_up_ms, concurrency, stalled_limit;
} wargs;

/*
 * A job whose complete or fail got no answer (the store timed out or the
 * connection dropped, maybe after the call was applied): it is settled
 * when the store answers again.
 */
typedef struct unsettled {
    cli_run job;   /* its queue, id, attempt and lease */
    bool complete; /* the call was complete (else fail) */
} unsettled;

/* A worker at work. */
typedef struct work {
    const wargs *a;
    sluice_store *store;
    sluice_worker *w;
    const char *probe;      /* a queue whose limiter the store is asked */
    cli_run *runs;          /* a->concurrency slots */
    size_t running;         /* slots whose command runs */
    unsettled *unsettled;   /* room for a->concurrency + 1 */
    size_t nunsettled;
    uint64_t taken;         /* jobs taken (--count) */
    uint64_t idle_since;    /* when a job was last taken or finished */
    uint64_t down_since;    /* 0 while the store answers; else since when */
    uint64_t backoff_ms;    /* the wait before the store is asked again */
    uint64_t probe_at;      /* when it is */
    bool over;              /* stop: 'status' is the exit status */
    int status;
} work;

/* The end of the loop with exit status 'status'. */
static void work_over(work *wk, int status)
{
    wk->over = true;
    wk->status = status;
}

/* ---- Output ---------------------------------------------------------------- */

/* One line for one job. */
static void print_job(const wargs *a, const cli_run *job, const char *outcome)
{
    if (a->json) {
        fputs("{\"queue\":", stdout);
        cli_json_string(stdout, job->queue, job->queue_len);
        printf(",\"id\":%llu,\"attempt\":%llu,\"outcome\":\"%s\"}\n",
               (unsigned long long)job->id, (unsigned long long)job->attempt,
               outcome);
    } else {
        cli_put_safe(stdout, job->queue, job->queue_len, true);
        printf(" %llu %s\n", (unsigned long long)job->id, outcome);
    }
    fflush(stdout);
}

/* --verbose: one line per deferred take, from its telemetry event. */
static void on_deferred(const sluice_event *ev, void *payload)
{
    const sluice_metadata *queue = NULL, *limit = NULL;
    double delay_ms = 0;
    char *name, *cap;

    (void)payload;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        if (strcmp(ev->metadata[i].name, "queue") == 0)
            queue = &ev->metadata[i];
        else if (strcmp(ev->metadata[i].name, "limit") == 0)
            limit = &ev->metadata[i];
    }
    for (size_t i = 0; i < ev->n_measurements; i++)
        if (strcmp(ev->measurements[i].name, "delay_ms") == 0)
            delay_ms = ev->measurements[i].value;
    if (queue == NULL) /* a refused sluice_hit(), not a take */
        return;
    name = cli_safe_dup(queue->value, queue->value_len, true);
    cap = limit != NULL ? cli_safe_dup(limit->value, limit->value_len, true)
                        : NULL;
    cli_error("work: %s deferred: wait %.0f ms (cap %s)",
              name != NULL ? name : "?", delay_ms, cap != NULL ? cap : "?");
    free(name);
    free(cap);
}

/* ---- The store's outages --------------------------------------------------- */

/* The store answered: the end of an outage, if there was one. */
static void store_answered(work *wk)
{
    if (wk->down_since == 0)
        return;
    cli_error("work: the store answers again after %llu ms",
              (unsigned long long)(cli_mono_ms() - wk->down_since));
    wk->down_since = 0;
}

/*
 * Handles 'err', a call to the store that failed. An outage (the server
 * could not answer: SLUICE_ECONN, SLUICE_ETIMEDOUT) is ridden out: its
 * start is reported once, and the store is asked again after a back-off.
 * Anything else is reported and ends the worker. Returns true while the
 * worker goes on.
 */
static bool store_failed(work *wk, int err)
{
    uint64_t now = cli_mono_ms();

    if (err != SLUICE_ECONN && err != SLUICE_ETIMEDOUT) {
        work_over(wk, cli_lib_error("work", "work", err));
        return false;
    }
    if (wk->down_since == 0) {
        cli_error("work: the store is unreachable (%s); retrying (a job that "
                  "ends meanwhile is recorded when it answers)",
                  sluice_last_error());
        wk->down_since = now;
        wk->backoff_ms = BACKOFF_MIN_MS;
        wk->probe_at = now + wk->backoff_ms;
    }
    return true;
}

/*
 * Asks the store a question that only reads (the limiter of a served
 * queue), to learn whether it answers; an outage is handled as any. Returns
 * true when it answered.
 */
static bool store_ask(work *wk)
{
    uint64_t wait_ms;
    int err = sluice_emq_rate_limit_ttl(&wait_ms, wk->store, wk->probe,
                                        strlen(wk->probe), 0);

    if (err == 0)
        store_answered(wk);
    else
        store_failed(wk, err);
    return err == 0;
}

/* In an outage, asks the store again once the back-off has passed, and
   doubles it if the store still does not answer. Takes resume when it
   does. */
static void store_probe(work *wk, uint64_t now)
{
    if (wk->down_since == 0 || now < wk->probe_at || store_ask(wk) ||
        wk->over)
        return;
    wk->backoff_ms = 2 * wk->backoff_ms < BACKOFF_MAX_MS ? 2 * wk->backoff_ms
                                                         : BACKOFF_MAX_MS;
    wk->probe_at = cli_mono_ms() + wk->backoff_ms;
}

/* ---- Jobs -------------------------------------------------------------------- */

/* How often a running job's lease is renewed: a third of it. */
static uint64_t beat_every_ms(const wargs *a)
{
    return a->job.lease_ms >= 3 ? a->job.lease_ms / 3 : 1;
}

/*
 * Completes 'job' ('complete') or fails it; answers the call's error, and
 * in '*outcome' the word for its line when it succeeded.
 */
static int record_job(work *wk, const cli_run *job, bool complete,
                      const char **outcome)
{
    int dead = 0, err;

    if (complete) {
        err = sluice_queue_complete(wk->store, job->queue, job->queue_len,
                                    job->id, job->lease);
        *outcome = "done";
    } else {
        err = sluice_queue_fail(&dead, wk->store, job->queue, job->queue_len,
                                job->id, job->lease, wk->a->job.max_attempts,
                                wk->a->job.backoff_ms);
        *outcome = dead ? "failed" : "retrying";
    }
    return err;
}

/* Keeps 'job', whose complete or fail ('complete') got no answer, to be
   settled when the store answers again. */
static void keep_unsettled(work *wk, const cli_run *job, bool complete)
{
    unsettled *u;

    /* No take while one is kept, so the running jobs bound their number:
       room for a->concurrency + 1 is never short. Just in case: */
    if (wk->nunsettled > wk->a->concurrency) {
        print_job(wk->a, job, "unknown");
        return;
    }
    u = &wk->unsettled[wk->nunsettled++];
    u->job = *job;
    u->job.pid = 0;
    u->complete = complete;
}

/*
 * Records the end of 'job', whose command exited with 'code' (0 without
 * --exec): completes or fails it, and prints its line. A call that the
 * store did not answer (an outage) may have been applied or not: the job
 * is kept, and settled when the store answers again (settle_all()).
 */
static void finish_job(work *wk, const cli_run *job, int code)
{
    const char *outcome = "lost";
    int err = SLUICE_ELEASE;

    if (!job->lost)
        err = record_job(wk, job, code == 0, &outcome);
    if (err == 0) {
        store_answered(wk);
    } else if (err == SLUICE_ELEASE) {
        outcome = "lost";
    } else {
        if (store_failed(wk, err))
            keep_unsettled(wk, job, code == 0);
        return;
    }
    print_job(wk->a, job, outcome);
}

/*
 * The outcome of 'u' once the call, asked again, answered SLUICE_ELEASE:
 * the job is no longer held by its lease, so the first call was applied,
 * or the lease ran out first. Where the job is tells which: completed
 * ("gone") is a complete that was applied, its reply lost; waiting or
 * failed for good is a fail's outcome; anything else was not recorded, and
 * the job is, or will be, taken again ("lost"). Answers the word, or NULL
 * when the store did not answer (handled by store_failed()).
 */
static const char *settled_outcome(work *wk, const unsettled *u)
{
    const cli_run *job = &u->job;
    sluice_job_state where = 0;
    int err = sluice_queue_job_state(&where, wk->store, job->queue,
                                     job->queue_len, job->id, job->lease);

    if (err < 0) {
        store_failed(wk, err);
        return NULL;
    }
    if (u->complete && where == SLUICE_JOB_GONE) {
        char *name = cli_safe_dup(job->queue, job->queue_len, true);

        cli_error("work: %s %llu: the reply to its complete was lost, but "
                  "the store has it completed: done", name != NULL ? name
                                                                  : "?",
                  (unsigned long long)job->id);
        free(name);
        return "done";
    }
    if (!u->complete && where == SLUICE_JOB_WAITING)
        return "retrying";
    if (!u->complete && where == SLUICE_JOB_FAILED)
        return "failed";
    return "lost";
}

/*
 * Settles the jobs kept in an outage, now that the store answers: each
 * call is made again (the lease proves it, so a call already applied
 * answers SLUICE_ELEASE and changes nothing), and a SLUICE_ELEASE is told
 * apart by where the job is (settled_outcome()). Each settled job's line
 * is printed; should the store fail again, the rest are kept.
 */
static void settle_all(work *wk)
{
    size_t kept = 0;

    for (size_t i = 0; i < wk->nunsettled; i++) {
        unsettled *u = &wk->unsettled[i];
        const char *outcome = NULL;
        int err = SLUICE_ECONN;

        if (!wk->over && wk->down_since == 0)
            err = record_job(wk, &u->job, u->complete, &outcome);
        if (err == SLUICE_ELEASE)
            outcome = settled_outcome(wk, u);
        else if (err < 0 && !wk->over && wk->down_since == 0)
            store_failed(wk, err);
        if (err == 0 || outcome != NULL)
            print_job(wk->a, &u->job, outcome);
        else
            wk->unsettled[kept++] = *u;
    }
    wk->nunsettled = kept;
}

/*
 * At the end, the jobs still unsettled (the store never answered again):
 * each line says 'unknown', as whether its call was applied is. Answers
 * how many there were.
 */
static size_t unknown_all(work *wk)
{
    size_t n = wk->nunsettled;

    for (size_t i = 0; i < n; i++)
        print_job(wk->a, &wk->unsettled[i].job, "unknown");
    if (n > 0)
        cli_error("work: stopping with the store unreachable: %zu job%s "
                  "'unknown' (each is done, or comes back when its lease "
                  "ends)", n, n == 1 ? "" : "s");
    wk->nunsettled = 0;
    return n;
}

/* Finishes the jobs whose commands have ended. */
static void reap_all(work *wk)
{
    for (size_t i = 0; i < wk->a->concurrency && !wk->over; i++) {
        int code;

        if (wk->runs[i].pid == 0 || (code = cli_run_reap(wk->runs, i)) < 0)
            continue;
        wk->running--;
        wk->idle_since = cli_mono_ms();
        finish_job(wk, &wk->runs[i], code);
    }
}

/* Renews the leases that are due: the running jobs' heartbeat. */
static void beat_all(work *wk, uint64_t now)
{
    for (size_t i = 0; i < wk->a->concurrency && !wk->over; i++) {
        cli_run *r = &wk->runs[i];
        int err;

        if (r->pid == 0 || r->lost || r->beat_ms > now)
            continue;
        err = sluice_queue_extend(wk->store, r->queue, r->queue_len, r->id,
                                  r->lease, wk->a->job.lease_ms);
        r->beat_ms = now + beat_every_ms(wk->a);
        if (err == 0)
            store_answered(wk);
        else if (err == SLUICE_ELEASE)
            r->lost = true; /* 'lost' when CMD ends */
        else
            store_failed(wk, err);
    }
}

/* Starts the command of 'job' (of 'queue') in a free slot. */
static void start_job(work *wk, const char *queue, size_t queue_len,
                      const sluice_job *job)
{
    size_t slot = 0;

    while (wk->runs[slot].pid != 0)
        slot++;
    if (cli_run_start(wk->runs, slot, wk->a->exec, queue, queue_len, job) <
        0) {
        work_over(wk, CLI_EXIT_RUNTIME); /* its lease runs out; it comes back */
        return;
    }
    wk->runs[slot].beat_ms = cli_mono_ms() + beat_every_ms(wk->a);
    wk->running++;
}

/* Takes the next job, waiting at most 'timeout_ms', and starts it. */
static void take_job(work *wk, uint64_t timeout_ms)
{
    sluice_job job = {0};
    const char *queue;
    size_t queue_len = 0;
    int err = sluice_worker_next(&job, &queue, &queue_len, wk->w, timeout_ms);

    if (err < 0) {
        store_failed(wk, err);
    } else if (job.id != 0) {
        wk->taken++;
        wk->idle_since = cli_mono_ms();
        if (wk->a->exec != NULL) {
            start_job(wk, queue, queue_len, &job);
        } else {
            cli_run done = {.queue = queue, .queue_len = queue_len,
                            .id = job.id, .attempt = job.attempt,
                            .lease = job.lease};

            finish_job(wk, &done, 0);
        }
    }
    sluice_job_clear(&job);
}

/* ---- The loop ------------------------------------------------------------------ */

/* True when the worker may take another job now. */
static bool may_take(const work *wk)
{
    const wargs *a = wk->a;

    return !wk->over && !cli_work_stopping() && wk->down_since == 0 &&
           wk->nunsettled == 0 && wk->running < a->concurrency &&
           (a->count == 0 || wk->taken < a->count);
}

/*
 * True (with the exit status set) when the worker is to stop: an outage
 * past --give-up-after; or, with no command running, a signal, --count
 * jobs taken and settled, or --timeout with nothing to do.
 */
static bool loop_ends(work *wk, uint64_t now)
{
    const wargs *a = wk->a;

    if (wk->down_since != 0 && a->give_up_ms > 0 &&
        now - wk->down_since >= a->give_up_ms) {
        cli_error("work: the store has been unreachable for %llu ms, over "
                  "--give-up-after; giving up",
                  (unsigned long long)(now - wk->down_since));
        work_over(wk, CLI_EXIT_RUNTIME);
    } else if (wk->running > 0) {
        return false;
    } else if (cli_work_stopping() ||
               (a->count > 0 && wk->taken >= a->count &&
                wk->nunsettled == 0)) {
        work_over(wk, CLI_EXIT_OK);
    } else if (a->timeout_ms > 0 && now - wk->idle_since >= a->timeout_ms) {
        /* Asked now: a pattern worker with no queue yet has taken nothing,
           so no take of it told whether the store answers. */
        if (wk->down_since == 0 && !store_ask(wk) && wk->over)
            return true;
        if (wk->down_since != 0)
            cli_error("work: stopping at --timeout with the store still "
                      "unreachable");
        work_over(wk, wk->down_since != 0 ? CLI_EXIT_RUNTIME : CLI_EXIT_OK);
    }
    return wk->over;
}

/*
 * When the loop next has something to do: a lease to renew, the store to
 * ask again, --give-up-after or --timeout to reach; at the latest one
 * WORK_SLICE_MS from 'now' (WORK_BUSY_MS while a take would hide a
 * command's end).
 */
static uint64_t next_wake(const work *wk, uint64_t now)
{
    const wargs *a = wk->a;
    uint64_t wake = now + (wk->running > 0 && may_take(wk) ? WORK_BUSY_MS
                                                           : WORK_SLICE_MS);

    for (size_t i = 0; i < a->concurrency; i++)
        if (wk->runs[i].pid != 0 && !wk->runs[i].lost &&
            wk->runs[i].beat_ms < wake)
            wake = wk->runs[i].beat_ms;
    if (wk->down_since != 0 && wk->probe_at < wake)
        wake = wk->probe_at;
    if (wk->down_since != 0 && a->give_up_ms > 0 &&
        wk->down_since + a->give_up_ms < wake)
        wake = wk->down_since + a->give_up_ms;
    if (wk->running == 0 && a->timeout_ms > 0 &&
        wk->idle_since + a->timeout_ms < wake)
        wake = wk->idle_since + a->timeout_ms;
    return wake > now ? wake : now;
}

/* Takes and does jobs until told to stop; returns the exit status. */
static int work_loop(work *wk)
{
    wk->idle_since = cli_mono_ms();
    while (!wk->over) {
        uint64_t now = cli_mono_ms(), wake;

        reap_all(wk);
        beat_all(wk, now);
        store_probe(wk, now);
        if (wk->nunsettled > 0 && wk->down_since == 0 && !wk->over)
            settle_all(wk);
        /* Read again: the calls above may have set idle_since or
           down_since after the first reading, and now - idle_since would
           wrap around (--timeout at once). */
        now = cli_mono_ms();
        if (wk->over || loop_ends(wk, now))
            break;
        wake = next_wake(wk, now);
        if (may_take(wk))
            take_job(wk, wake - now);
        else
            cli_run_wait(wk->runs, wk->a->concurrency, wake - now);
    }
    if (wk->running > 0) {
        cli_error("work: stopping %zu running command%s (SIGTERM); their "
                  "jobs come back when their leases end", wk->running,
                  wk->running == 1 ? "" : "s");
        cli_run_stop_all(wk->runs, wk->a->concurrency);
    }
    if (unknown_all(wk) > 0 && wk->status == CLI_EXIT_OK)
        wk->status = CLI_EXIT_RUNTIME;
    return wk->status;
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
        CLI_OPT_TEXT("--store-file", &a->store_file),
        CLI_OPT_FLAG("--json", &a->json),
        CLI_OPT_FLAG("--verbose", &a->verbose),
        CLI_OPT_TEXT("--pattern", &a->pattern),
        CLI_OPT_TEXT("--exec", &a->exec),
        CLI_OPT_NUMBER("--concurrency", &a->concurrency, 1,
                       CLI_WORK_CONCURRENCY_MAX),
        CLI_OPT_DURATION("--lease", &a->job.lease_ms),
        CLI_OPT_NUMBER("--stalled-limit", &a->stalled_limit, 1,
                       CLI_MAX_ATTEMPTS_MAX),
        CLI_OPT_NUMBER("--count", &a->count, 1, UINT64_MAX),
        CLI_OPT_DURATION("--timeout", &a->timeout_ms),
        CLI_OPT_DURATION("--give-up-after", &a->give_up_ms),
        CLI_OPT_NUMBER("--max-attempts", &a->job.max_attempts, 1,
                       CLI_MAX_ATTEMPTS_MAX),
        CLI_OPT_DURATION_0("--backoff", &a->job.backoff_ms),
    };
    size_t nopts = sizeof(opts) / sizeof(opts[0]);
    int st;

    a->job = (cli_job_opts)CLI_JOB_OPTS_INIT;
    a->concurrency = 1;
    a->stalled_limit = 1;
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
    return cli_store_url(&a->store, "work", a->store_file);
}

/*
 * Serves jobs with worker 'w' on 'store' until told to stop, SIGINT and
 * SIGTERM included; 'probe' names a queue to ask in an outage. Returns the
 * exit status.
 */
static int serve(const wargs *a, sluice_store *store, sluice_worker *w,
                 const char *probe)
{
    work wk = {.a = a, .store = store, .w = w, .probe = probe};
    int st;

    wk.runs = calloc((size_t)a->concurrency, sizeof(cli_run));
    wk.unsettled = calloc((size_t)a->concurrency + 1, sizeof(unsettled));
    if (wk.runs == NULL || wk.unsettled == NULL) {
        cli_error("work: out of memory");
        free(wk.runs);
        free(wk.unsettled);
        return CLI_EXIT_RUNTIME;
    }
    if (a->verbose)
        sluice_telemetry_attach(VERBOSE_HANDLER,
                                SLUICE_EVENT_EMQ_RATE_LIMIT_HIT, on_deferred,
                                NULL);
    cli_work_signals_on();
    st = work_loop(&wk);
    cli_work_signals_off();
    if (a->verbose)
        sluice_telemetry_detach(VERBOSE_HANDLER);
    free(wk.runs);
    free(wk.unsettled);
    return st;
}

/* Opens the worker for the queues 'queues' (and the pattern) of 'a' on
   'store'. Returns 0, or the exit status of a failure (reported). */
static int worker_open(sluice_worker **w, sluice_store *store,
                       const wargs *a, const cli_pos *queues)
{
    sluice_worker_opts wopts = SLUICE_WORKER_OPTS_INIT;
    int err;

    wopts.lease_ms = a->job.lease_ms;
    wopts.pattern = a->pattern;
    wopts.stalled_limit = a->stalled_limit;
    err = sluice_worker_new(w, store, queues->args, NULL, queues->n, &wopts);
    if (err == SLUICE_EINVAL) /* the arguments: a pattern that is none */
        return cli_usage_error("work", "work: %s%s (EINVAL)",
                               a->pattern != NULL ? "--pattern: " : "",
                               sluice_last_error());
    return err < 0 ? cli_lib_error("work", "work", err) : 0;
}

int cli_work(int argc, char **argv)
{
    sluice_store *store = NULL;
    sluice_worker *w = NULL;
    wargs a = {0};
    cli_pos queues = {.max = (size_t)argc, .what = "QUEUE..."};
    int st;

    if ((queues.args = malloc(((size_t)argc + 1) * sizeof(char *))) == NULL) {
        cli_error("work: out of memory");
        return CLI_EXIT_RUNTIME;
    }
    if ((st = work_args(&a, &queues, argc, argv)) == 0 &&
        (st = cli_store_open(&store, "work", a.store, CLI_QUEUES_NEED_SERVER,
                             NULL)) == 0 &&
        (st = worker_open(&w, store, &a, &queues)) == 0)
        st = serve(&a, store, w, queues.n > 0 ? queues.args[0] : a.pattern);
    free(queues.args);
    sluice_worker_free(w);
    sluice_store_free(store);
    return st;
}
