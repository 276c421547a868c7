/*
 * test_module_repl.c - what the module writes reaches replicas and the AOF
 * as effects, never as a SLUICE.* command a replica or a reload would decide
 * again on another clock.
 *
 * A master with the module and --appendonly yes, and two real replicas
 * (--replicaof), one without the module (it must never need it) and one
 * with it. After a mix of hits, refusals, peeks (one giving a TTL to a
 * count found without one), SLUICE.HITMANY, SLUICE.RESET and the queue
 * limiter's increment, on every algorithm that has glue: every key on both
 * replicas equals the master's (type, value, and absolute expiry to the ms,
 * PEXPIRETIME); the AOF holds no SLUICE.* command and does hold absolute
 * expiries (PXAT, PEXPIREAT); a refusal and a peek move the replication
 * offset not at all. The master is then killed and started again from its
 * AOF: every key and its absolute expiry are back as they were.
 */
#include "module_fixture.h"
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

static rs_server master, plain, loaded;

/* Every key of 's' with its type, value and absolute expiry, sorted. */
static void dump(rs_server *s, char *out, size_t cap)
{
    redisReply *r = rs_cmd(s, "KEYS *");
    char *names[256];
    size_t n = 0;

    out[0] = '\0';
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL)
            freeReplyObject(r);
        return;
    }
    for (size_t i = 0; i < r->elements && n < 256; i++)
        names[n++] = r->element[i]->str;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];

            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        mf_state st;
        long long at;

        mf_state_of(s, names[i], &st);
        at = rs_int(s, "PEXPIRETIME %s", names[i]);
        snprintf(out + strlen(out), cap - strlen(out), "%s=%s:%s@%lld\n",
                 names[i], st.type, st.value, at);
    }
    freeReplyObject(r);
}

static long long repl_offset(void)
{
    return rs_info_count(&master, "replication", "master_repl_offset:");
}

/* Whether the module has glue for 'algo' on this build. */
static int has_glue(sluice_algo algo)
{
    redisReply *r = rs_cmd(&master, "SLUICE.HIT probe %s 3 1000 PEEK",
                           sluice_algo_name(algo));
    int yes = r != NULL && r->type == REDIS_REPLY_ARRAY;

    if (r != NULL)
        freeReplyObject(r);
    return yes;
}

/* A mix of decisions on algorithm 'algo', keys "NAME:...". */
static void mix(sluice_algo algo)
{
    const char *name = sluice_algo_name(algo);

    for (int i = 0; i < 5; i++)
        rs_ok(&master, "SLUICE.HIT %s:a %s 3 60000", name, name);
    rs_ok(&master, "SLUICE.HIT %s:b %s 5 60000 COST 2", name, name);
    rs_ok(&master, "SLUICE.HIT %s:b %s 5 60000 PEEK", name, name);
    rs_ok(&master, "SLUICE.HITMANY %s 4 60000 KEYS {%s}x 1 {%s}y 3 {%s}x 2",
          name, name, name, name);
    rs_ok(&master, "SLUICE.HIT %s:c %s 2 60000", name, name);
    rs_ok(&master, "SLUICE.RESET %s:c", name);
    rs_ok(&master, "SLUICE.HIT %s:d %s 9 60000 NOW 1733000000000", name,
          name);
}

/* A refusal and a peek write nothing, so they replicate nothing. */
static void test_silent(void)
{
    long long before;

    rs_ok(&master, "SLUICE.HIT s:full fixed 1 60000");
    rs_ok(&master, "SLUICE.HIT s:tat gcra 1 60000");
    rs_ok(&master, "WAIT 2 5000");
    before = repl_offset();
    rs_ok(&master, "SLUICE.HIT s:full fixed 1 60000");
    rs_ok(&master, "SLUICE.HIT s:full fixed 1 60000 PEEK");
    rs_ok(&master, "SLUICE.HIT s:none fixed 1 60000 PEEK");
    rs_ok(&master, "SLUICE.HIT s:tat gcra 1 60000");
    rs_ok(&master, "SLUICE.HIT s:tat gcra 1 60000 PEEK");
    rs_ok(&master, "SLUICE.RESET s:none");
    CHECK_EQ_U64(repl_offset(), before);
}

/* Until both replicas are linked and have every write so far. */
static int replicas_caught_up(void)
{
    for (int i = 0; i < 200; i++) {
        if (rs_info_count(&master, "replication", "connected_slaves:") == 2 &&
            rs_int(&master, "WAIT 2 100") == 2)
            return 0;
        rs_sleep_ms(50);
    }
    return -1;
}

/*
 * Replicas that lose their link and come back by a partial resync replay
 * the backlog on their own copy of the keys: counts added meanwhile on
 * windows already armed (INCR, INCRBY: effects on the key's value alone)
 * must give them the master's keys again, expiries included.
 */
static void test_reconnect(sluice_algo algo)
{
    const char *name = sluice_algo_name(algo);
    long long partial = rs_info_count(&master, "stats", "sync_partial_ok:");

    CHECK(rs_ok(&master, "SLUICE.HIT %s:r %s 10 60000", name, name) == 0);
    CHECK(rs_ok(&master, "SLUICE.HIT %s:r %s 10 60000", name, name) == 0);
    CHECK(replicas_caught_up() == 0);
    CHECK(rs_int(&master, "CLIENT KILL TYPE replica") >= 2);
    CHECK(rs_ok(&master, "SLUICE.HIT %s:r %s 10 60000", name, name) == 0);
    CHECK(rs_ok(&master, "SLUICE.HIT %s:r %s 10 60000 COST 3", name,
                name) == 0);
    CHECK(rs_ok(&master, "SLUICE.HIT %s:s %s 10 60000", name, name) == 0);
    CHECK(rs_ok(&master, "SLUICE.HIT %s:s %s 10 60000", name, name) == 0);
    CHECK(replicas_caught_up() == 0);
    CHECK(rs_info_count(&master, "stats", "sync_partial_ok:") >= partial + 2);
}

/* Whether 'text' holds 'word', in any case. */
static int has_word(const char *text, size_t n, const char *word)
{
    size_t w = strlen(word);

    for (size_t i = 0; i + w <= n; i++) {
        size_t k = 0;

        while (k < w && tolower((unsigned char)text[i + k]) ==
                            tolower((unsigned char)word[k]))
            k++;
        if (k == w)
            return 1;
    }
    return 0;
}

/* The AOF's commands since start: no SLUICE.*, absolute expiries. */
static void test_aof(void)
{
    char path[1024], dir[512];
    struct dirent *e;
    DIR *d;
    int files = 0;

    snprintf(dir, sizeof(dir), "%s/appendonlydir", master.dir);
    if (!CHECK((d = opendir(dir)) != NULL))
        return;
    while ((e = readdir(d)) != NULL) {
        static char text[1 << 20];
        size_t n;
        FILE *f;

        if (strstr(e->d_name, ".incr.aof") == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (!CHECK((f = fopen(path, "rb")) != NULL))
            continue;
        n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        files++;
        CHECK(n > 0);
        CHECK(!has_word(text, n, "sluice."));
        CHECK(strstr(text, "PXAT") != NULL);
        CHECK(strstr(text, "PEXPIREAT") != NULL);
        /* A count added on a window already armed: the effect on the value
           alone, as the script's own INCRBY is replicated. */
        CHECK(strstr(text, "\r\nINCR\r\n") != NULL);
        CHECK(strstr(text, "\r\nINCRBY\r\n") != NULL);
        CHECK(strstr(text, "EVAL") == NULL);
    }
    closedir(d);
    CHECK_EQ_U64(files, 1);
}

static int start_all(void)
{
    char port[16];
    /* appendfsync always: every write is in the file before its reply (with
       everysec, a write may wait up to 2 s behind a slow fsync, and a
       SIGKILL loses it, as documented). */
    const char *m_extra[] = {"--appendonly", "yes", "--appendfsync", "always",
                             NULL};

    if (mf_start(&master, m_extra) < 0)
        return -1;
    snprintf(port, sizeof(port), "%d", master.port);
    {
        const char *p_extra[] = {"--replicaof", "127.0.0.1", port, NULL};

        if (rs_start(&plain, p_extra) < 0 || mf_start(&loaded, p_extra) < 0)
            return -1;
    }
    for (int i = 0; i < 200; i++) {
        if (rs_info_count(&master, "replication", "connected_slaves:") == 2 &&
            rs_int(&master, "WAIT 2 100") == 2)
            return 0;
        rs_sleep_ms(50);
    }
    fprintf(stderr, "test_module_repl: the replicas did not connect\n");
    return -1;
}

int main(void)
{
    static char m[1 << 19], p[1 << 19], l[1 << 19], again[1 << 19];
    int algos = 0;

    if (start_all() < 0)
        return 1;
    /* The queue limiter, and a count left without a TTL that a peek arms. */
    rs_ok(&master, "SLUICE.EMQINCR emq:{q}:limiter 60000");
    rs_ok(&master, "SLUICE.EMQINCR emq:{q}:limiter 60000");
    rs_ok(&master, "SET fixed:nottl 1");
    rs_ok(&master, "SLUICE.HIT fixed:nottl fixed 1 60000 PEEK");
    for (unsigned i = 0; i < TEST_ALGO_N; i++)
        if (has_glue((sluice_algo)i)) {
            mix((sluice_algo)i);
            algos++;
        }
    CHECK(algos >= 2);
    test_silent();
    for (unsigned i = 0; i < TEST_ALGO_N; i++)
        if (has_glue((sluice_algo)i))
            test_reconnect((sluice_algo)i);
    CHECK_EQ_U64(rs_int(&master, "WAIT 2 5000"), 2);
    dump(&master, m, sizeof(m));
    dump(&plain, p, sizeof(p));
    dump(&loaded, l, sizeof(l));
    CHECK(strlen(m) > 0 && strstr(m, "@-1\n") == NULL);
    CHECK(strcmp(m, p) == 0);
    CHECK(strcmp(m, l) == 0);
    if (getenv("SLUICE_TEST_VERBOSE") != NULL)
        printf("%s", m);
    if (strcmp(m, p) != 0)
        fprintf(stderr, "master:\n%s\nreplica:\n%s\n", m, p);
    test_aof();
    rs_kill(&master);
    CHECK(rs_restart(&master) == 0);
    dump(&master, again, sizeof(again));
    CHECK(strcmp(m, again) == 0);
    if (strcmp(m, again) != 0)
        fprintf(stderr, "before:\n%s\nafter the AOF:\n%s\n", m, again);
    rs_stop(&plain);
    rs_stop(&loaded);
    rs_stop(&master);
    return test_summary("test_module_repl");
}
