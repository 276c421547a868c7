/*
 * test_valkey_sentinel.c - a store through Sentinel (valkey+sentinel://)
 * rides out failovers, on real servers: a master, its replica and a
 * redis-sentinel (the launcher's rs_sentinel).
 *
 * - TLS to the sentinels and the master (valkeys+sentinel://), through a
 *   SENTINEL FAILOVER; the sentinels' certificate verified.
 * - Passwords: the sentinels' own (sentinel_password=) and the master's
 *   (the URL's userinfo); either wrong is SLUICE_EAUTH.
 * - The sentinels' errors: a master name they do not know is
 *   SLUICE_ECONFIG, never admitted under on_error=open; a URL with no
 *   master name is refused when the store opens.
 * - Under load from 4 processes (each its own store, hitting one budget),
 *   SENTINEL FAILOVER, then the new master killed: calls fail for no longer
 *   than the failover takes (each process's longest run of failures is
 *   printed, and bounded), then succeed on the new master with no restart
 *   (every process has successes after the kill). The admissions beyond
 *   the server's count -- acknowledged increments lost with the killed
 *   master -- are printed.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "server.h"
#include "test.h"
#include "tls_certs.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS 4
#define GAP_BOUND_MS 15000 /* a killed master: down-after, then the vote */

static rs_sentinel st;

typedef struct load {
    _Atomic int stop;
    _Atomic int failed_over;  /* SENTINEL FAILOVER is done */
    _Atomic uint64_t kill_ms; /* when the master was killed; 0 before */
    struct {
        uint64_t calls, admitted, failed, longest_gap_ms, after_failover,
            after_kill;
    } proc[PROCS];
} load;

static const sluice_limit budget = {.algo = SLUICE_FIXED, .max = 100000000,
                                    .window_ms = 3600000};

/* One process of load: hits until told to stop, and counts. */
static void load_run(load *l, int i)
{
    sluice_store *s = NULL;
    char url[200];
    uint64_t failing_since = 0;

    snprintf(url, sizeof(url), "%s?timeout=300", st.url);
    if (sluice_store_open(&s, url, NULL) < 0)
        _exit(2);
    while (!atomic_load(&l->stop)) {
        sluice_decision d;
        int rc = sluice_hit(&d, s, &budget, "budget", 6, 1);
        uint64_t now = rs_mono_ms();

        l->proc[i].calls++;
        if (rc == 0) {
            l->proc[i].admitted += d.allowed;
            if (failing_since != 0 &&
                now - failing_since > l->proc[i].longest_gap_ms)
                l->proc[i].longest_gap_ms = now - failing_since;
            failing_since = 0;
            if (atomic_load(&l->kill_ms) != 0)
                l->proc[i].after_kill++;
            else if (atomic_load(&l->failed_over))
                l->proc[i].after_failover++;
        } else {
            l->proc[i].failed++;
            if (failing_since == 0)
                failing_since = now;
        }
    }
    sluice_store_free(s);
    _exit(0);
}

static void test_errors(void)
{
    sluice_store *s = NULL;
    sluice_decision d;
    char url[200];

    test_context("sentinel errors");
    snprintf(url, sizeof(url), "valkey+sentinel://127.0.0.1:%d/nosuch?"
             "on_error=open&timeout=500", st.sentinel.port);
    if (CHECK_OK(sluice_store_open(&s, url, NULL))) {
        CHECK_RC(sluice_hit(&d, s, &budget, "k", 1, 1), SLUICE_ECONFIG);
        CHECK(!d.allowed);
        CHECK(strstr(sluice_last_error(), "nosuch") != NULL);
        sluice_store_free(s);
    }
    snprintf(url, sizeof(url), "valkey+sentinel://127.0.0.1:%d",
             st.sentinel.port);
    CHECK_RC(sluice_store_open(&s, url, NULL), SLUICE_EURL);
    /* A plain URL that names the replica: READONLY, a misconfiguration
       (ECONFIG), never an outage that on_error=open would admit. */
    snprintf(url, sizeof(url), "valkey://127.0.0.1:%d?on_error=open&"
             "engine=lua", st.nodes[1].port);
    if (CHECK_OK(sluice_store_open(&s, url, NULL))) {
        CHECK_RC(sluice_hit(&d, s, &budget, "k", 1, 1), SLUICE_ECONFIG);
        CHECK(!d.allowed);
        CHECK(strstr(sluice_last_error(), "replica") != NULL);
        sluice_store_free(s);
    }
    test_context(NULL);
}

/* The budget's count on the master the sentinel names now; -1 if none. */
static long long budget_held(void)
{
    rs_server *m = rs_sentinel_master(&st);
    redisReply *r = m != NULL ? rs_cmd(m, "GET sluice:{budget}:fixed") : NULL;
    long long held = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        held = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    return held;
}

/*
 * Sentinels with a password of their own and a master with another:
 * sentinel_password= is the sentinels', the URL's userinfo the master's;
 * either one wrong is SLUICE_EAUTH, never admitted, and the message never
 * shows a password.
 */
static void test_passwords(void)
{
    static const char *const master_pw[] = {"--requirepass", "mpw", NULL};
    static const char *const sentinel_pw[] = {"--requirepass", "spw", NULL};
    static const struct {
        const char *userinfo, *query;
        int rc;
    } cases[] = {
        {":mpw@", "sentinel_password=spw", 0},
        {":mpw@", "sentinel_password=nope", SLUICE_EAUTH},
        {":mpw@", "", SLUICE_EAUTH},
        {":nope@", "sentinel_password=spw", SLUICE_EAUTH},
    };
    rs_sentinel ps;

    test_context("sentinel and master passwords");
    if (!CHECK(rs_sentinel_start(&ps, master_pw, sentinel_pw) == 0))
        return;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_store *s = NULL;
        sluice_decision d;
        char url[300];

        snprintf(url, sizeof(url), "valkey+sentinel://%s127.0.0.1:%d/%s?"
                 "on_error=open&timeout=500%s%s", cases[i].userinfo,
                 ps.sentinel.port, RS_SENTINEL_MASTER,
                 cases[i].query[0] ? "&" : "", cases[i].query);
        if (!CHECK_OK(sluice_store_open(&s, url, NULL)))
            continue;
        CHECK_RC(sluice_hit(&d, s, &budget, "pw", 2, 1), cases[i].rc);
        CHECK(d.allowed == (cases[i].rc == 0));
        if (cases[i].rc != 0)
            CHECK(strstr(sluice_last_error(), "spw") == NULL &&
                  strstr(sluice_last_error(), "nope") == NULL &&
                  strstr(sluice_last_error(), "mpw") == NULL);
        sluice_store_free(s);
    }
    rs_sentinel_stop(&ps);
    test_context(NULL);
}

/* TLS to the sentinels and to the master (valkeys+sentinel://), through
   a failover. */
static void test_tls(void)
{
    const rs_certs *c = rs_certs_get();
    rs_sentinel ts;
    sluice_store *s = NULL;
    sluice_decision d;
    char url[1200];

    test_context("sentinel over TLS");
    if (!CHECK(c != NULL && rs_sentinel_start_tls(&ts) == 0))
        return;
    snprintf(url, sizeof(url), "%s?tls_ca=%s&timeout=1000", ts.url,
             c->ca_cert);
    if (CHECK_OK(sluice_store_open(&s, url, NULL))) {
        CHECK_OK(sluice_hit(&d, s, &budget, "t", 1, 1));
        CHECK(rs_sentinel_failover(&ts) > 0);
        /* The first call after meets the demoted master: its READONLY (a
           write refused) sends the call again, to the master the
           sentinels name now, within its deadline. */
        CHECK_OK(sluice_hit(&d, s, &budget, "t", 1, 1));
        CHECK_OK(sluice_hit(&d, s, &budget, "t", 1, 1));
        sluice_store_free(s);
    }
    /* The sentinels' certificate checked as any server's. */
    snprintf(url, sizeof(url), "%s?tls_ca=%s&on_error=open", ts.url,
             c->other_ca_cert);
    if (CHECK_OK(sluice_store_open(&s, url, NULL))) {
        CHECK_RC(sluice_hit(&d, s, &budget, "t", 1, 1), SLUICE_EAUTH);
        CHECK(!d.allowed);
        sluice_store_free(s);
    }
    rs_sentinel_stop(&ts);
    test_context(NULL);
}

/* The admissions the load processes have counted so far. */
static uint64_t admitted_now(const load *l)
{
    uint64_t n = 0;

    for (int i = 0; i < PROCS; i++)
        n += l->proc[i].admitted;
    return n;
}

/*
 * The increments the first failover lost, within bounds: the new master's
 * count against the admissions counted just before and just after it was
 * read (the load goes on meanwhile). Into '*lo' and '*hi'.
 */
static void lost_so_far(const load *l, long long *lo, long long *hi)
{
    uint64_t before = admitted_now(l);
    long long held = budget_held();
    uint64_t after = admitted_now(l);

    *lo = (long long)before - held > 0 ? (long long)before - held : 0;
    *hi = (long long)after - held;
}

static void test_failover_under_load(void)
{
    load *l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[PROCS];
    rs_server *m;
    uint64_t admitted = 0, longest = 0, t0;
    long long held, lost_lo = 0, lost_hi = 0;
    int port;

    test_context("failover under load");
    if (!CHECK(l != MAP_FAILED))
        return;
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < PROCS; i++)
        if ((pids[i] = fork()) == 0)
            load_run(l, i);
    rs_sleep_ms(800);
    t0 = rs_mono_ms();
    port = rs_sentinel_failover(&st);
    CHECK(port > 0);
    atomic_store(&l->failed_over, 1);
    printf("  SENTINEL FAILOVER: the sentinel named the replica after %llu "
           "ms\n", (unsigned long long)(rs_mono_ms() - t0));
    rs_sleep_ms(RS_SENTINEL_FAILOVER_GAP_MS);
    lost_so_far(l, &lost_lo, &lost_hi);
    /* A crash of the new master: the sentinel promotes the old one. */
    m = rs_sentinel_master(&st);
    if (CHECK(m != NULL)) {
        rs_server *other = m == &st.nodes[0] ? &st.nodes[1] : &st.nodes[0];

        atomic_store(&l->kill_ms, rs_mono_ms());
        t0 = rs_mono_ms();
        rs_sentinel_kill(&st, m);
        CHECK(rs_sentinel_wait_master(&st, other->port, GAP_BOUND_MS) == 0);
        printf("  master killed: the sentinel named the other after %llu "
               "ms\n", (unsigned long long)(rs_mono_ms() - t0));
        rs_sleep_ms(1500);
    }
    atomic_store(&l->stop, 1);
    for (int i = 0; i < PROCS; i++) {
        int status = 0;

        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        printf("  process %d: %" PRIu64 " calls, %" PRIu64 " admitted, %"
               PRIu64 " failed, longest run of failures %" PRIu64 " ms, %"
               PRIu64 " answered after SENTINEL FAILOVER, %" PRIu64 " after "
               "the kill\n", i, l->proc[i].calls, l->proc[i].admitted,
               l->proc[i].failed, l->proc[i].longest_gap_ms,
               l->proc[i].after_failover, l->proc[i].after_kill);
        admitted += l->proc[i].admitted;
        if (l->proc[i].longest_gap_ms > longest)
            longest = l->proc[i].longest_gap_ms;
        /* The new master, each time, with no restart. */
        CHECK(l->proc[i].after_failover > 0);
        CHECK(l->proc[i].after_kill > 0);
    }
    held = budget_held();
    printf("  the longest gap: %" PRIu64 " ms (bound %d); admitted %" PRIu64
           ", the new master holds %lld: %lld admitted beyond the budget's "
           "count (acknowledged increments the failovers lost: %lld to %lld "
           "in the SENTINEL FAILOVER, the old master's before it was "
           "demoted; the rest with the killed master)\n",
           longest, GAP_BOUND_MS, admitted, held,
           (long long)admitted - held, lost_lo, lost_hi);
    CHECK(longest > 0 && longest < GAP_BOUND_MS);
    CHECK(held > 0 && (uint64_t)held <= admitted);
    munmap(l, sizeof(*l));
    test_context(NULL);
}

int main(void)
{
    if (rs_sentinel_start(&st, NULL, NULL) < 0) {
        fprintf(stderr, "test_valkey_sentinel: cannot start the sentinel "
                "setup\n");
        return 1;
    }
    printf("  %s\n", st.url);
    test_errors();
    test_passwords();
    test_tls();
    test_failover_under_load();
    rs_sentinel_stop(&st);
    return test_summary("test_valkey_sentinel");
}
