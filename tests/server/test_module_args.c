/*
 * test_module_args.c - every bad argument of the module's commands, one
 * row each: the reply is an error that names what is wrong ("ERR sluice:
 * ..."), and nothing is written (the keyspace is as it was: the same keys,
 * values and TTLs; no key the call named appears). A request that fails
 * HITMANY's checks on its last pair leaves its first key alone too.
 */
#include "module_fixture.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

#define MAX_ARGS 16

typedef struct row {
    const char *argv[MAX_ARGS]; /* NULL-terminated */
    const char *want;           /* a part of the error's text */
} row;

static const row rows[] = {
    /* SLUICE.HIT: arity, algorithm, numbers */
    {{"SLUICE.HIT"}, "ERR sluice: wrong number of arguments for SLUICE.HIT"},
    {{"SLUICE.HIT", "k", "fixed", "3"}, "wrong number of arguments"},
    {{"SLUICE.HIT", "k", "nope", "3", "1000"}, "unknown algorithm 'nope'"},
    {{"SLUICE.HIT", "k", "", "3", "1000"}, "unknown algorithm ''"},
    {{"SLUICE.HIT", "k", "fixed", "0", "1000"}, "max must be a whole number"},
    {{"SLUICE.HIT", "k", "fixed", "9007199254740992", "1000"},
     "max must be a whole number from 1 to 9007199254740991"},
    {{"SLUICE.HIT", "k", "fixed", "-3", "1000"}, "max must be", },
    {{"SLUICE.HIT", "k", "fixed", "+3", "1000"}, "max must be"},
    {{"SLUICE.HIT", "k", "fixed", " 3", "1000"}, "max must be"},
    {{"SLUICE.HIT", "k", "fixed", "3x", "1000"}, "got '3x'"},
    {{"SLUICE.HIT", "k", "fixed", "1.5", "1000"}, "max must be"},
    {{"SLUICE.HIT", "k", "fixed", "", "1000"}, "max must be"},
    {{"SLUICE.HIT", "k", "fixed", "99999999999999999999", "1000"},
     "max must be"},
    {{"SLUICE.HIT", "k", "fixed", "18446744073709551617", "1000"},
     "max must be"},
    {{"SLUICE.HIT", "k", "fixed", "3", "0"}, "window_ms must be"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1099511627777"},
     "window_ms must be a whole number from 1 to 1099511627776"},
    {{"SLUICE.HIT", "k", "fixed", "3", "ten"}, "window_ms must be"},
    /* ... its options */
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST", "0"},
     "COST must be a whole number from 1"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST", "4"},
     "cost 4 exceeds max 3"},
    {{"SLUICE.HIT", "k", "gcra", "3", "1000", "BURST", "2", "COST", "3"},
     "cost 3 exceeds burst 2"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "BURST", "2"},
     "fixed has no burst"},
    {{"SLUICE.HIT", "k", "gcra", "3", "1000", "BURST", "4"},
     "gcra's burst 4 is out of range"},
    {{"SLUICE.HIT", "k", "gcra", "100000000", "100000000"},
     "gcra needs max x window_ms <= 2^53"},
    {{"SLUICE.HIT", "k", "sliding-counter", "100000000", "100000000"},
     "needs max x window_ms <= 2^53"},
    {{"SLUICE.HIT", "k", "compact-log", "2000000", "1000"}, "compact-log"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST", "1", "COST", "1"},
     "COST is given twice"},
    {{"SLUICE.HIT", "k", "gcra", "3", "1000", "BURST", "1", "burst", "1"},
     "BURST is given twice"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "PEEK", "peek"},
     "PEEK is given twice"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "NOW", "1", "NOW", "2"},
     "NOW is given twice"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST"}, "COST needs a value"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "NOW"}, "NOW needs a value"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "BOGUS"},
     "unknown option 'BOGUS'"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "KEYS", "a", "1"},
     "unknown option 'KEYS'"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "NOW", "9007199254740993"},
     "NOW must be a whole number from 0 to 9007199254740992"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "NOW", "-1"}, "NOW must be"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST", "-1"}, "COST must be"},
    {{"SLUICE.HIT", "k", "fixed", "3", "1000", "COST",
      "99999999999999999999"}, "COST must be"},
    /* SLUICE.HITMANY */
    {{"SLUICE.HITMANY"}, "wrong number of arguments for SLUICE.HITMANY"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000"}, "KEYS key cost"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "PEEK"}, "KEYS key cost"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS"},
     "KEYS needs key cost pairs (got 0 arguments after KEYS)"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS", "a"},
     "KEYS needs key cost pairs (got 1 argument after KEYS)"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS", "a", "1", "b"},
     "KEYS needs key cost pairs"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS", "a", "1", "b", "0"},
     "cost must be"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS", "a", "1", "b", "4"},
     "cost 4 exceeds max 3"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "KEYS", "a", "1", "b", "x"},
     "cost must be"},
    {{"SLUICE.HITMANY", "gcra", "3", "1000", "BURST", "1", "KEYS", "a", "1",
      "b", "2"}, "cost 2 exceeds burst 1"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "COST", "1", "KEYS", "a", "1"},
     "unknown option 'COST'"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "BURST", "1", "KEYS", "a",
      "1"}, "fixed has no burst"},
    {{"SLUICE.HITMANY", "fixed", "3", "1000", "NOW", "1", "NOW", "1", "KEYS",
      "a", "1"}, "NOW is given twice"},
    {{"SLUICE.HITMANY", "nope", "3", "1000", "KEYS", "a", "1"},
     "unknown algorithm"},
    {{"SLUICE.HITMANY", "fixed", "0", "1000", "KEYS", "a", "1"},
     "max must be"},
    {{"SLUICE.HITMANY", "fixed", "3", "0", "KEYS", "a", "1"},
     "window_ms must be"},
    /* SLUICE.RESET, the queue limiter, SLUICE.VERSION */
    {{"SLUICE.RESET"}, "wrong number of arguments for SLUICE.RESET"},
    {{"SLUICE.EMQINCR"}, "wrong number of arguments for SLUICE.EMQINCR"},
    {{"SLUICE.EMQINCR", "lim"}, "wrong number of arguments"},
    {{"SLUICE.EMQINCR", "lim", "1000", "1", "x"},
     "wrong number of arguments"},
    {{"SLUICE.EMQINCR", "lim", "1000", "x"}, "now must be"},
    {{"SLUICE.EMQINCR", "lim", "1000", "9007199254740993"}, "now must be"},
    {{"SLUICE.EMQINCR", "lim", "0"}, "window_ms must be"},
    {{"SLUICE.EMQINCR", "lim", "abc"}, "window_ms must be"},
    {{"SLUICE.EMQINCR", "lim", "1099511627777"}, "window_ms must be"},
    {{"SLUICE.EMQTTL", "lim"}, "wrong number of arguments for SLUICE.EMQTTL"},
    {{"SLUICE.EMQTTL", "lim", "meta", "3", "1", "x"},
     "wrong number of arguments"},
    {{"SLUICE.EMQTTL", "lim", "meta", "3", "x"}, "now must be"},
    {{"SLUICE.EMQTTL", "lim", "meta", "3", "-1"}, "now must be"},
    {{"SLUICE.EMQTTL", "lim", "meta", "-1"}, "max must be"},
    {{"SLUICE.EMQTTL", "lim", "meta", "9007199254740992"}, "max must be"},
    {{"SLUICE.VERSION", "x"}, "SLUICE.VERSION takes no argument"},
};

/* What the keyspace holds, as one string: every key (sorted), its
   value and its TTL's presence. */
static void keyspace(char *out, size_t cap)
{
    redisReply *r = rs_cmd(&server, "KEYS *");
    size_t n = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;

    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        mf_state st;

        mf_state_of(&server, r->element[i]->str, &st);
        snprintf(out + strlen(out), cap - strlen(out), "%s=%s:%s:%s ",
                 r->element[i]->str, st.type, st.value,
                 st.pttl < 0 ? "no-ttl" : "ttl");
    }
    if (r != NULL)
        freeReplyObject(r);
}

static void test_rows(void)
{
    char before[4096], after[4096];

    rs_ok(&server, "SET fx 1 PX 600000");
    rs_ok(&server, "SET gc 1733000000000:1 PX 600000");
    rs_ok(&server, "HSET meta max 3 duration 1000");
    keyspace(before, sizeof(before));
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row *rw = &rows[i];
        const char *argv[MAX_ARGS];
        size_t lens[MAX_ARGS];
        int argc = 0;
        redisReply *r;

        while (argc < MAX_ARGS && rw->argv[argc] != NULL) {
            argv[argc] = rw->argv[argc];
            lens[argc] = strlen(rw->argv[argc]);
            argc++;
        }
        test_context("row %zu: %s ... (want '%s')", i, rw->argv[0], rw->want);
        r = rs_cmdargv(&server, argc, argv, lens);
        if (!CHECK(r != NULL))
            continue;
        CHECK(r->type == REDIS_REPLY_ERROR);
        if (r->type == REDIS_REPLY_ERROR) {
            CHECK(strncmp(r->str, "ERR sluice: ", 12) == 0);
            CHECK(strstr(r->str, rw->want) != NULL);
            if (strstr(r->str, rw->want) == NULL)
                fprintf(stderr, "  got: %s\n", r->str);
        }
        freeReplyObject(r);
        keyspace(after, sizeof(after));
        CHECK(strcmp(before, after) == 0);
    }
    test_context(NULL);
}

/* Each algorithm answers, or says plainly that it has no glue here. */
static void test_glues(void)
{
    for (unsigned i = 0; i < TEST_ALGO_N; i++) {
        const char *name = sluice_algo_name((sluice_algo)i);
        redisReply *r = rs_cmd(&server, "SLUICE.HIT glue:%s %s 3 1000 PEEK",
                               name, name);
        char want[128];

        snprintf(want, sizeof(want),
                 "ERR sluice: no module glue for algorithm %s", name);
        test_context("algorithm %s", name);
        CHECK(r != NULL && ((r->type == REDIS_REPLY_ARRAY && r->elements == 4) ||
                            (r->type == REDIS_REPLY_ERROR &&
                             strcmp(r->str, want) == 0)));
        if (r != NULL)
            freeReplyObject(r);
    }
    test_context(NULL);
    /* The names are read in any case. */
    CHECK(rs_ok(&server, "SLUICE.HIT glue:x FiXeD 3 1000 PEEK") == 0);
    CHECK(rs_ok(&server, "SLUICE.HIT glue:x fixed 3 1000 cost 2 peek now 5") ==
          0);
}

int main(void)
{
    if (mf_start(&server, NULL) < 0) {
        fprintf(stderr, "test_module_args: cannot start redis-server with "
                        "the module\n");
        return 1;
    }
    test_rows();
    test_glues();
    rs_stop(&server);
    return test_summary("test_module_args");
}
