/*
 * demo_chat.c - 'sluice demo chat --store URL': the job queue in the chat
 * game of the design notes (codemojex), for real, on a server.
 *
 * Every chat has its own queue, capped at CAP_MAX jobs per CAP_WINDOW_MS.
 * One chat floods (FLOOD_MSGS messages at once); the QUIET_CHATS others send
 * QUIET_MSGS each, one every QUIET_GAP_MS. WORKERS child processes, each
 * running a sluice worker over all the chats' queues, do the jobs for RUN_MS;
 * every add time travels in the payload, so a worker measures the wait from
 * add to take, and sends its figures back over a pipe. The parent then
 * prints, per chat, the jobs done, the throughput and the waits, and empties
 * the queues it made.
 *
 * The queues live under a fresh queue-key prefix (emq_prefix=, appended to
 * the URL), so runs, and the user's own queues, never meet.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHATS 20u
#define FLOOD 0u               /* the index of the flooding chat */
#define QUIET_CHATS (CHATS - 1u)
#define FLOOD_MSGS 2000u
#define QUIET_MSGS 10u
#define QUIET_START_MS 500u    /* the first quiet message, after the flood */
#define QUIET_GAP_MS 400u      /* between two messages of one quiet chat */
#define QUIET_STAGGER_MS 20u   /* between the quiet chats' schedules */
#define CAP_MAX 20u            /* each chat's cap: jobs per window */
#define CAP_WINDOW_MS 1000u
#define WORKERS 3u             /* worker processes */
#define RUN_MS 5000u           /* how long the workers work */
#define WORK_US 2000u          /* one job's work: the game engine's share */
#define LEASE_MS 10000u
#define NAME_MAX_LEN 32
/* A message's payload: its chat, its number, its add time (wall-clock us). */
#define PAYLOAD_FORMAT "chat=%u msg=%u sent_us=%llu"
#define PAYLOAD_CAP 64

_Static_assert(QUIET_START_MS + (QUIET_MSGS - 1) * QUIET_GAP_MS +
                   (QUIET_CHATS - 1) * QUIET_STAGGER_MS + 250 < RUN_MS,
               "every quiet message arrives well before the workers stop");
_Static_assert((1000u + QUIET_GAP_MS - 1) / QUIET_GAP_MS <
                   CAP_MAX * 1000u / CAP_WINDOW_MS,
               "a quiet chat stays under its cap");

/* ---- Time ------------------------------------------------------------------- */

/* Wall-clock microseconds: the add and take times that processes compare. */
static uint64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u),
                          (long)(us % 1000000u) * 1000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Sleeps until 'at_ms' on the monotonic clock. */
static void sleep_until_ms(uint64_t at_ms)
{
    uint64_t now = cli_mono_ms();

    if (at_ms > now)
        sleep_us((at_ms - now) * 1000u);
}

/* ---- The chats ---------------------------------------------------------------- */

static void chat_name(char *buf, unsigned chat)
{
    snprintf(buf, NAME_MAX_LEN, "demo-chat:%02u", chat + 1);
}

/* One job done: its chat, when it was added and when it was taken. */
typedef struct record {
    unsigned chat;
    uint64_t add_us, take_us;
} record;

/* What the parent gathers. */
typedef struct chat_result {
    unsigned sent, done;
    uint64_t *waits_us; /* 'done' of them */
} chat_result;

/* ---- A worker process ------------------------------------------------------------ */

/* A telemetry handler: counts the takes deferred at a cap. */
static void count_deferred(const sluice_event *event, void *payload)
{
    (void)event;
    (*(uint64_t *)payload)++;
}

/* The jobs one worker did, to report. */
typedef struct records {
    record *v;
    size_t n, cap;
} records;

/* Appends 'r' to 'rs'; SLUICE_ENOMEM when it cannot grow. */
static int records_add(records *rs, record r)
{
    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? 2 * rs->cap : 256;
        record *nv = realloc(rs->v, ncap * sizeof(*nv));

        if (nv == NULL)
            return SLUICE_ENOMEM;
        rs->v = nv;
        rs->cap = ncap;
    }
    rs->v[rs->n++] = r;
    return SLUICE_OK;
}

/*
 * Does 'job' of 'queue', taken at 'take_us': reads its chat and add time
 * from the payload, works, completes it and records it in 'rs'. Returns 0
 * or an error code (SLUICE_EPROTO: a payload the demo did not write).
 */
static int do_job(sluice_store *store, const char *queue,
                  const sluice_job *job, uint64_t take_us, records *rs)
{
    unsigned chat, msg;
    unsigned long long add_us;
    int err;

    if (sscanf(job->payload, PAYLOAD_FORMAT, &chat, &msg, &add_us) != 3 ||
        chat >= CHATS)
        return SLUICE_EPROTO;
    sleep_us(WORK_US); /* the game engine's work for one message */
    if ((err = sluice_queue_complete(store, queue, strlen(queue), job->id,
                                     job->lease)) < 0)
        return err;
    return records_add(rs, (record){chat, add_us, take_us});
}

/*
 * Takes and does jobs with worker 'w' until 'deadline_ms' (monotonic),
 * recording them in 'rs'. Returns 0 or the error code that stopped it.
 */
static int serve_chats(sluice_store *store, sluice_worker *w,
                       uint64_t deadline_ms, records *rs)
{
    sluice_job job = {0};
    int err = 0;

    for (uint64_t now; (now = cli_mono_ms()) < deadline_ms;) {
        const char *queue;

        if ((err = sluice_worker_next(&job, &queue, NULL, w,
                                      deadline_ms - now)) < 0)
            break;
        if (job.id == 0)
            continue;
        if ((err = do_job(store, queue, &job, wall_us(), rs)) < 0)
            break;
    }
    sluice_job_clear(&job);
    return err;
}

/*
 * Writes worker 'n's report to 'out': "E MESSAGE" if 'err' stopped it,
 * "J CHAT ADD_US TAKE_US" per job of 'rs', then "D DEFERRED".
 */
static void write_report(FILE *out, unsigned n, int err, const records *rs,
                         uint64_t deferred)
{
    if (err < 0)
        fprintf(out, "E worker %u: %s (%s)\n", n,
                err == SLUICE_EPROTO ? "a payload it did not write"
                : err == SLUICE_ENOMEM ? "out of memory"
                                       : sluice_last_error(),
                sluice_err_name(err));
    for (size_t i = 0; i < rs->n; i++)
        fprintf(out, "J %u %llu %llu\n", rs->v[i].chat,
                (unsigned long long)rs->v[i].add_us,
                (unsigned long long)rs->v[i].take_us);
    fprintf(out, "D %llu\n", (unsigned long long)deferred);
}

/*
 * The body of worker process 'n': serves every chat on the store at 'url'
 * until 'deadline_ms' (monotonic), then writes its report to 'out'. Never
 * returns.
 */
static void worker_main(unsigned n, const char *url, uint64_t deadline_ms,
                        FILE *out)
{
    char names[CHATS][NAME_MAX_LEN], handler[32];
    const char *queues[CHATS];
    sluice_worker_opts wopts = SLUICE_WORKER_OPTS_INIT;
    sluice_store *store = NULL;
    sluice_worker *w = NULL;
    records rs = {NULL, 0, 0};
    uint64_t deferred = 0;
    int err;

    for (unsigned c = 0; c < CHATS; c++) {
        chat_name(names[c], c);
        queues[c] = names[c];
    }
    snprintf(handler, sizeof(handler), "demo-chat-%u", n);
    wopts.lease_ms = LEASE_MS;
    if ((err = sluice_store_open(&store, url, NULL)) < 0 ||
        (err = sluice_worker_new(&w, store, queues, NULL, CHATS, &wopts)) < 0 ||
        (err = sluice_telemetry_attach(handler,
                                       SLUICE_EVENT_EMQ_RATE_LIMIT_HIT,
                                       count_deferred, &deferred)) < 0) {
        fprintf(out, "E worker %u: %s (%s)\n", n, sluice_last_error(),
                sluice_err_name(err));
        fclose(out);
        _exit(CLI_EXIT_RUNTIME);
    }
    err = serve_chats(store, w, deadline_ms, &rs);
    write_report(out, n, err, &rs, deferred);
    fclose(out);
    sluice_telemetry_detach(handler);
    sluice_worker_free(w);
    sluice_store_free(store);
    free(rs.v);
    _exit(err < 0 ? CLI_EXIT_RUNTIME : CLI_EXIT_OK);
}

/* ---- The parent ---------------------------------------------------------------- */

/* Writes the payload of message 'msg' of 'chat', added now, as do_job()
   reads it; returns its length. */
static size_t payload_of(char out[PAYLOAD_CAP], unsigned chat, unsigned msg)
{
    return (size_t)snprintf(out, PAYLOAD_CAP, PAYLOAD_FORMAT, chat, msg,
                            (unsigned long long)wall_us());
}

/* Adds message 'msg' of 'chat', its add time in the payload. */
static int send_message(sluice_store *store, unsigned chat, unsigned msg)
{
    char name[NAME_MAX_LEN], payload[PAYLOAD_CAP];
    size_t len = payload_of(payload, chat, msg);
    uint64_t id;

    chat_name(name, chat);
    return sluice_queue_add(&id, store, name, strlen(name), payload, len, 0);
}

/*
 * Adds the flooding chat's FLOOD_MSGS messages at once, FLOOD_BATCH to a
 * bulk add (a round trip each, not one a message: on a loaded machine, a
 * message at a time could still be adding when the quiet chats' schedule
 * begins). Counts those added in 'res'.
 */
static int send_flood(sluice_store *store, chat_result *res)
{
    enum { FLOOD_BATCH = 500 };
    char name[NAME_MAX_LEN], payloads[FLOOD_BATCH][PAYLOAD_CAP];
    sluice_new_job jobs[FLOOD_BATCH];
    int err = SLUICE_OK;

    chat_name(name, FLOOD);
    for (unsigned first = 0; first < FLOOD_MSGS && err == SLUICE_OK;
         first += FLOOD_BATCH) {
        unsigned n = FLOOD_MSGS - first < FLOOD_BATCH ? FLOOD_MSGS - first
                                                      : FLOOD_BATCH;

        memset(jobs, 0, sizeof(jobs));
        for (unsigned i = 0; i < n; i++) {
            jobs[i].payload = payloads[i];
            jobs[i].payload_len = payload_of(payloads[i], FLOOD, first + i);
        }
        err = sluice_queue_add_many(store, name, strlen(name), jobs, n);
        for (unsigned i = 0; i < n; i++)
            res[FLOOD].sent += jobs[i].id != 0;
    }
    return err;
}

/*
 * Sends every chat's messages: the flood at once, then the quiet chats'
 * on their schedule from 'start_ms' (monotonic). Counts them in 'res'.
 */
static int send_all(sluice_store *store, uint64_t start_ms, chat_result *res)
{
    int err;

    if ((err = send_flood(store, res)) < 0)
        return err;
    /* Message m of quiet chat q is due at QUIET_START + m x GAP + q x STAGGER. */
    for (unsigned m = 0; m < QUIET_MSGS; m++) {
        for (unsigned q = 0; q < QUIET_CHATS; q++) {
            unsigned chat = (FLOOD + 1 + q) % CHATS; /* all but FLOOD */

            sleep_until_ms(start_ms + QUIET_START_MS + m * QUIET_GAP_MS +
                           q * QUIET_STAGGER_MS);
            if ((err = send_message(store, chat, m)) < 0)
                return err;
            res[chat].sent++;
        }
    }
    return SLUICE_OK;
}

/*
 * Reads one worker's report from 'in' into 'res'; adds its deferred takes
 * to '*deferred'. Returns 0, or -1 after printing the worker's error.
 */
static int read_report(FILE *in, chat_result *res, uint64_t *deferred)
{
    char line[512];
    int status = 0;

    while (fgets(line, sizeof(line), in) != NULL) {
        unsigned chat;
        unsigned long long a, t;

        if (sscanf(line, "J %u %llu %llu", &chat, &a, &t) == 3 &&
            chat < CHATS) {
            chat_result *r = &res[chat];

            if (r->done < r->sent)
                r->waits_us[r->done++] = t > a ? t - a : 0;
        } else if (sscanf(line, "D %llu", &a) == 1) {
            *deferred += a;
        } else if (line[0] == 'E') {
            line[strcspn(line, "\n")] = '\0';
            cli_error("demo chat: %s", line + 2);
            status = -1;
        }
    }
    return status;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The 'pct' percentile (nearest rank) of 'n' sorted values, in ms. */
static double percentile_ms(const uint64_t *v, size_t n, unsigned pct)
{
    size_t rank = (n * pct + 99) / 100;

    if (n == 0)
        return 0.0;
    return (double)v[rank > 0 ? rank - 1 : 0] / 1000.0;
}

/*
 * Empties the demo's queues (jobs the workers did not get to): removes each
 * cap and takes and completes what is left, so the server keeps only the
 * queues' small meta hashes. Best effort.
 */
static void drain(sluice_store *store)
{
    for (unsigned c = 0; c < CHATS; c++) {
        char name[NAME_MAX_LEN];
        sluice_take_status st = SLUICE_TAKE_JOB;
        sluice_job job = {0};
        uint64_t wait;

        chat_name(name, c);
        if (sluice_queue_set_cap(store, name, strlen(name), 0, 0) < 0)
            continue;
        while (sluice_queue_take(&st, &wait, &job, store, name, strlen(name),
                                 LEASE_MS) == 0 && st == SLUICE_TAKE_JOB)
            sluice_queue_complete(store, name, strlen(name), job.id,
                                  job.lease);
        sluice_job_clear(&job);
    }
}

static void print_report(const char *prefix, chat_result *res,
                         uint64_t deferred)
{
    uint64_t quiet[QUIET_CHATS * QUIET_MSGS];
    size_t nquiet = 0;
    unsigned quiet_sent = 0;
    const chat_result *f = &res[FLOOD];
    double secs = RUN_MS / 1000.0;

    printf("sluice demo chat: %u chats, each its own queue, capped at %u jobs "
           "per %g s.\n", CHATS, CAP_MAX, CAP_WINDOW_MS / 1000.0);
    printf("demo-chat:%02u floods %u messages at once; the %u others send %u "
           "each, one per\n%u ms. %u worker processes serve all %u queues for "
           "%.1f s; a job is %u ms of\nwork. Wait = add to take (the add time "
           "rides in the payload).\nKeys: emq_prefix=%s on the server.\n\n",
           FLOOD + 1, FLOOD_MSGS, QUIET_CHATS, QUIET_MSGS, QUIET_GAP_MS,
           WORKERS, CHATS, secs, WORK_US / 1000u, prefix);
    printf("%-13s %5s %5s %5s %7s %10s %10s\n", "chat", "sent", "done", "left",
           "jobs/s", "wait p50", "wait p99");
    for (unsigned c = 0; c < CHATS; c++) {
        chat_result *r = &res[c];
        char name[NAME_MAX_LEN];

        chat_name(name, c);
        qsort(r->waits_us, r->done, sizeof(uint64_t), cmp_u64);
        printf("%-13s %5u %5u %5u %7.1f %8.1fms %8.1fms%s\n", name, r->sent,
               r->done, r->sent - r->done, r->done / secs,
               percentile_ms(r->waits_us, r->done, 50),
               percentile_ms(r->waits_us, r->done, 99),
               c == FLOOD ? "  <- flooding" : "");
        if (c != FLOOD) {
            memcpy(&quiet[nquiet], r->waits_us, r->done * sizeof(uint64_t));
            nquiet += r->done;
            quiet_sent += r->sent;
        }
    }
    qsort(quiet, nquiet, sizeof(uint64_t), cmp_u64);
    printf("\nquiet chats: %zu of %u done; wait p50 %.1f ms, p99 %.1f ms "
           "over all of them.\n", nquiet, quiet_sent,
           percentile_ms(quiet, nquiet, 50), percentile_ms(quiet, nquiet, 99));
    printf("flooding chat: %u done in %.1f s = %.1f jobs/s, its cap %u per "
           "%g s; %u left\nwaiting. Takes deferred at the cap: %llu "
           "(emq.rate_limit.hit events).\n\n", f->done, secs, f->done / secs,
           CAP_MAX, CAP_WINDOW_MS / 1000.0, f->sent - f->done,
           (unsigned long long)deferred);
    printf("Each chat's cap is one fixed-window counter on the server "
           "(emq:{chat}:limiter),\nchecked and counted in the same atomic "
           "script that takes a job, so it is one\nbudget for all %u worker "
           "processes, not one each. Once the flooding chat has had\nits %u "
           "jobs in a window, its takes are deferred until the counter "
           "expires, and\nthe workers' turns go to the other chats: the flood "
           "queues up behind its own cap\n(its waits grow with its backlog) "
           "while every quiet message is taken at once.\n", WORKERS, CAP_MAX);
}

/* The store URL with a fresh emq_prefix= appended (later options win). */
static char *fresh_url(const char *url, char *prefix, size_t prefix_cap)
{
    size_t len = strlen(url), cap;
    const char *sep = "?";
    char *out;

    snprintf(prefix, prefix_cap, "sluice-demo-%ld-%llu", (long)getpid(),
             (unsigned long long)(wall_us() / 1000u));
    if (len > 0 && (url[len - 1] == '?' || url[len - 1] == '&'))
        sep = "";
    else if (strchr(url, '?') != NULL)
        sep = "&";
    cap = len + strlen(prefix) + 16;
    if ((out = malloc(cap)) != NULL)
        snprintf(out, cap, "%s%semq_prefix=%s", url, sep, prefix);
    return out;
}

/*
 * Caps every chat's queue on 'store' and makes room in 'res' for the waits
 * each chat can have. Returns 0, or the exit status of a failure (reported).
 */
static int chat_prepare(sluice_store *store, chat_result *res)
{
    for (unsigned c = 0; c < CHATS; c++) {
        char name[NAME_MAX_LEN];
        int err;

        chat_name(name, c);
        err = sluice_queue_set_cap(store, name, strlen(name), CAP_MAX,
                                   CAP_WINDOW_MS);
        res[c].waits_us = calloc(c == FLOOD ? FLOOD_MSGS : QUIET_MSGS,
                                 sizeof(uint64_t));
        if (err < 0)
            return cli_lib_error(NULL, "demo chat", err);
        if (res[c].waits_us == NULL) {
            cli_error("demo chat: out of memory (%s)",
                      sluice_err_name(SLUICE_ENOMEM));
            return CLI_EXIT_RUNTIME;
        }
    }
    return CLI_EXIT_OK;
}

/* The worker processes, and the pipes their reports come back on. */
typedef struct crew {
    pid_t pids[WORKERS];
    FILE *reports[WORKERS];
    unsigned started;
} crew;

/*
 * Starts the next worker process of 'cr', on the store at 'url', to work
 * until 'deadline_ms'. Returns 0, or CLI_EXIT_RUNTIME (reported).
 */
static int crew_add(crew *cr, const char *url, uint64_t deadline_ms)
{
    unsigned n = cr->started;
    int fds[2];

    if (pipe(fds) < 0) {
        cli_error("demo chat: cannot start a worker: %s", strerror(errno));
        return CLI_EXIT_RUNTIME;
    }
    if ((cr->pids[n] = fork()) < 0) {
        cli_error("demo chat: cannot start a worker: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return CLI_EXIT_RUNTIME;
    }
    if (cr->pids[n] == 0) {
        FILE *out = fdopen(fds[1], "w");

        close(fds[0]);
        for (unsigned i = 0; i < n; i++)
            fclose(cr->reports[i]);
        if (out == NULL)
            _exit(CLI_EXIT_RUNTIME);
        worker_main(n, url, deadline_ms, out);
    }
    close(fds[1]);
    if ((cr->reports[n] = fdopen(fds[0], "r")) == NULL) {
        close(fds[0]);
        kill(cr->pids[n], SIGTERM);
        waitpid(cr->pids[n], NULL, 0);
        return CLI_EXIT_RUNTIME;
    }
    cr->started++;
    return CLI_EXIT_OK;
}

/*
 * Reads the report of every worker of 'cr' into 'res' and '*deferred' and
 * waits for the process. Returns 0, or CLI_EXIT_RUNTIME when a worker
 * failed (reported).
 */
static int crew_collect(crew *cr, chat_result *res, uint64_t *deferred)
{
    int status = CLI_EXIT_OK;

    for (unsigned i = 0; i < cr->started; i++) {
        int wstatus;

        if (read_report(cr->reports[i], res, deferred) < 0)
            status = CLI_EXIT_RUNTIME;
        fclose(cr->reports[i]);
        while (waitpid(cr->pids[i], &wstatus, 0) < 0 && errno == EINTR)
            ;
    }
    return status;
}

/*
 * The scenario on 'store', reached at 'url' (the user's URL with the fresh
 * 'prefix'): starts the workers, sends the messages, gathers the workers'
 * reports and prints what they show. Returns the exit status.
 */
static int chat_play(sluice_store *store, const char *url, const char *prefix,
                     chat_result *res)
{
    crew cr = {.started = 0};
    uint64_t start_ms, deferred = 0;
    int status = CLI_EXIT_OK, err;

    /* The workers: fresh processes, each with its own connections. */
    fflush(stdout);
    fflush(stderr);
    start_ms = cli_mono_ms();
    while (status == CLI_EXIT_OK && cr.started < WORKERS)
        status = crew_add(&cr, url, start_ms + RUN_MS);
    if (status == CLI_EXIT_OK && (err = send_all(store, start_ms, res)) < 0)
        status = cli_lib_error(NULL, "demo chat: adding a message", err);
    /* The workers stop at start + RUN_MS, then report. */
    if (crew_collect(&cr, res, &deferred) != CLI_EXIT_OK)
        status = CLI_EXIT_RUNTIME;
    if (status == CLI_EXIT_OK)
        print_report(prefix, res, deferred);
    return status;
}

/* Runs the scenario on the store at 'url'; returns the exit status. */
static int chat_run(const char *url)
{
    chat_result res[CHATS];
    char prefix[64], *full;
    sluice_store *store = NULL;
    int status;

    memset(res, 0, sizeof(res));
    if ((full = fresh_url(url, prefix, sizeof(prefix))) == NULL) {
        cli_error("demo chat: out of memory");
        return CLI_EXIT_RUNTIME;
    }
    if ((status = cli_store_open(&store, "demo", full, NULL, NULL)) == 0 &&
        (status = chat_prepare(store, res)) == 0) {
        status = chat_play(store, full, prefix, res);
        drain(store);
    }
    for (unsigned c = 0; c < CHATS; c++)
        free(res[c].waits_us);
    sluice_store_free(store);
    free(full);
    return status;
}

int cli_demo_chat(int argc, char **argv)
{
    const char *url = NULL, *file = NULL;
    cli_opt opts[] = {CLI_OPT_TEXT("--store", &url),
                      CLI_OPT_TEXT("--store-file", &file)};
    cli_pos none = {.max = 0}; /* no operands */
    int st;

    if ((st = cli_opts_parse("demo", argc, argv, opts, 2, &none,
                             CLI_CHECK_AT_ONCE)) != 0 ||
        (st = cli_store_url(&url, "demo", file)) != 0)
        return st;
    if (url == NULL)
        return cli_usage_error("demo", "demo chat: needs a server store: "
                               "--store valkey://HOST[:PORT] (its queues and "
                               "their caps live on the server; or "
                               "--store-file PATH, or " CLI_STORE_ENV ")");
    if (cli_url_is_embedded(url))
        return cli_usage_error("demo", "demo chat: the embedded store "
                               "(mem://) has no queues; give a server: "
                               "--store valkey://HOST[:PORT]");
    return chat_run(url);
}
