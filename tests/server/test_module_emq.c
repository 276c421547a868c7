/*
 * test_module_emq.c - the queue limiter's module commands against its
 * scripts on a real redis-server with sluice.so loaded: SLUICE.EMQINCR
 * against emq_incr.lua and SLUICE.EMQTTL against emq_ttl.lua, from the same
 * states of the limiter (absent; a count with a TTL; "0"; without a TTL,
 * where the increment arms one and the read sees no wait; not a number; at
 * INCRBY's overflow; a list) and of the meta hash (absent; a cap; a cap of
 * 0, below 0, not a number; not a hash; a cap without a duration, which
 * the read of the hash's cap refuses as the take does), with the cap given
 * or not, and the caller's clock ('now', as every queue script takes it)
 * absent, empty (the server's), 0, a day or 2^53: both take it and, as the
 * limiter's clock is the counter's PTTL, use none. Replies
 * must be equal (a wait within the moment between the calls; an error the
 * same kind of error) and the limiter each leaves the same. A 'now' that is
 * no clock (not a number, past 2^53) is the module's error, nothing
 * changed, as SLUICE.HIT's NOW is.
 */
#include "module_fixture.h"
#include "test.h"

#include "queue/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

#define MARGIN_MS 60

static const struct {
    const char *what, *value;
    long long px;
} limiters[] = {
    {"none", NULL, 0},        {"a count", "2", 50000},
    {"at cap", "3", 50000},   {"past cap", "9", 50000},
    {"zero", "0", 50000},     {"no TTL", "5", 0},
    {"not a number", "x", 0}, {"overflow", "9223372036854775807", 50000},
    {"tonumber", " 4 ", 50000}, {"a list", "<list>", 0},
};

static const struct {
    const char *what, *max; /* NULL: no hash; "<string>": not a hash */
    const char *duration;   /* NULL: no field */
} metas[] = {
    {"none", NULL, NULL},       {"cap 3", "3", "1000"},
    {"cap 0", "0", "1000"},     {"cap -1", "-1", "1000"},
    {"cap x", "x", "1000"},     {"cap 3.5", "3.5", "1000"},
    {"no cap field", "", "1000"}, {"a string", "<string>", NULL},
    /* A cap read from the hash without a duration is an error. */
    {"cap 3, no duration", "3", NULL}, {"cap 3, duration 0", "3", "0"},
    {"cap 0, duration x", "0", "x"},   {"cap x, no duration", "x", NULL},
    {"no field at all", "", NULL},
};

/* The 'now' argument: absent (NULL), the server's (""), or a caller's. */
static const char *const nows[] = {NULL, "", "0", "86400000",
                                   "9007199254740992"};
#define NOWS (sizeof(nows) / sizeof(nows[0]))

static void put_limiter(const char *key, int i)
{
    rs_ok(&server, "DEL %s", key);
    if (limiters[i].value == NULL)
        return;
    if (strcmp(limiters[i].value, "<list>") == 0)
        rs_ok(&server, "RPUSH %s x", key);
    else if (limiters[i].px > 0)
        rs_ok(&server, "SET %s %s PX %lld", key, limiters[i].value,
              limiters[i].px);
    else
        rs_ok(&server, "SET %s %s", key, limiters[i].value);
}

static void put_meta(const char *key, int j)
{
    rs_ok(&server, "DEL %s", key);
    if (metas[j].max == NULL)
        return;
    if (strcmp(metas[j].max, "<string>") == 0)
        rs_ok(&server, "SET %s 3", key);
    else if (metas[j].max[0] == '\0')
        rs_ok(&server, "HSET %s duration %s", key,
              metas[j].duration ? metas[j].duration : "");
    else if (metas[j].duration == NULL)
        rs_ok(&server, "HSET %s max %s", key, metas[j].max);
    else
        rs_ok(&server, "HSET %s max %s duration %s", key, metas[j].max,
              metas[j].duration);
}

/* Two replies to the same call: equal integers (or arrays of them, the
   last a PTTL), or errors of the same kind. */
static void same_reply(const redisReply *m, const redisReply *l)
{
    CHECK(m != NULL && l != NULL);
    if (m == NULL || l == NULL)
        return;
    CHECK(m->type == l->type);
    if (m->type != l->type) {
        fprintf(stderr, "  module: %s / script: %s\n",
                m->type == REDIS_REPLY_ERROR ? m->str : "(not an error)",
                l->type == REDIS_REPLY_ERROR ? l->str : "(not an error)");
        return;
    }
    if (m->type == REDIS_REPLY_ERROR) {
        /* The script adds where it failed; the server's message leads. A
           message that names the meta key names each side's own. */
        char text[512], *at;

        snprintf(text, sizeof(text), "%s", m->str);
        if ((at = strstr(text, "m:meta")) != NULL)
            at[0] = 'l';
        CHECK(strncmp(text, l->str, strlen(text)) == 0);
        if (strncmp(text, l->str, strlen(text)) != 0)
            fprintf(stderr, "  module: %s / script: %s\n", m->str, l->str);
    } else if (m->type == REDIS_REPLY_INTEGER) {
        CHECK(llabs(m->integer - l->integer) <= MARGIN_MS);
    } else {
        CHECK(m->type == REDIS_REPLY_ARRAY && m->elements == 2 &&
              l->elements == 2);
        if (m->elements == 2 && l->elements == 2) {
            CHECK_EQ_U64(m->element[0]->integer, l->element[0]->integer);
            CHECK(llabs(m->element[1]->integer - l->element[1]->integer) <=
                  MARGIN_MS);
        }
    }
}

static void same_limiter(void)
{
    mf_state m, l;

    CHECK(mf_state_of(&server, "m:lim", &m) == 0);
    CHECK(mf_state_of(&server, "l:lim", &l) == 0);
    CHECK(mf_state_same(&m, &l, MARGIN_MS));
}

static void test_incr(void)
{
    const char *sha = sluice__script_emq_incr.sha1;

    for (size_t i = 0; i < sizeof(limiters) / sizeof(limiters[0]); i++) {
        for (int round = 0; round < 2 * (int)NOWS; round++) {
            const char *now = nows[round / 2];
            redisReply *m, *l;

            test_context("incr: limiter %s, now %s, round %d",
                         limiters[i].what, now ? now : "absent", round % 2);
            if (round % 2 == 0) {
                put_limiter("m:lim", (int)i);
                put_limiter("l:lim", (int)i);
            }
            if (now == NULL) {
                m = rs_cmd(&server, "SLUICE.EMQINCR m:lim 7000");
                l = rs_cmd(&server, "EVALSHA %s 1 l:lim 7000", sha);
            } else {
                m = rs_cmd(&server, "SLUICE.EMQINCR m:lim 7000 %s", now);
                l = rs_cmd(&server, "EVALSHA %s 1 l:lim 7000 %s", sha, now);
            }
            same_reply(m, l);
            same_limiter();
            freeReplyObject(m);
            freeReplyObject(l);
        }
    }
    test_context(NULL);
}

static void test_ttl(void)
{
    const char *sha = sluice__script_emq_ttl.sha1;
    static const char *caps[] = {NULL, "0", "3", "10"};

    for (size_t i = 0; i < sizeof(limiters) / sizeof(limiters[0]); i++)
        for (size_t j = 0; j < sizeof(metas) / sizeof(metas[0]); j++)
            for (int k = 0; k < 4 * (int)NOWS; k++) {
                const char *cap = caps[k % 4], *now = nows[k / 4];
                redisReply *m, *l;

                test_context("ttl: limiter %s, meta %s, cap %s, now %s",
                             limiters[i].what, metas[j].what,
                             cap ? cap : "absent", now ? now : "absent");
                put_limiter("m:lim", (int)i);
                put_limiter("l:lim", (int)i);
                put_meta("m:meta", (int)j);
                put_meta("l:meta", (int)j);
                if (now != NULL)
                    m = rs_cmd(&server, "SLUICE.EMQTTL m:lim m:meta %s %s",
                               cap ? cap : "0", now);
                else if (cap == NULL)
                    m = rs_cmd(&server, "SLUICE.EMQTTL m:lim m:meta");
                else
                    m = rs_cmd(&server, "SLUICE.EMQTTL m:lim m:meta %s", cap);
                l = rs_cmd(&server, "EVALSHA %s 2 l:lim l:meta %s %s", sha,
                           cap ? cap : "0", now ? now : "");
                same_reply(m, l);
                same_limiter();
                freeReplyObject(m);
                freeReplyObject(l);
            }
    test_context(NULL);
}

/* A full counter with a TTL answers its PTTL; the read changes nothing. */
static void test_ttl_wait(void)
{
    long long wait;

    rs_ok(&server, "SET m:lim 3 PX 5000");
    wait = rs_int(&server, "SLUICE.EMQTTL m:lim m:none 3");
    CHECK(wait > 5000 - MARGIN_MS && wait <= 5000);
    CHECK_EQ_U64(rs_int(&server, "SLUICE.EMQTTL m:lim m:none 4"), 0);
    CHECK(rs_int(&server, "PTTL m:lim") > 5000 - MARGIN_MS);
}

/* A 'now' that is no clock: the module's error, and nothing changes. */
static void test_bad_now(void)
{
    static const char *const bad[] = {"x", "-1", "1.5", "9007199254740993"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redisReply *r;

        test_context("a bad now: '%s'", bad[i]);
        rs_ok(&server, "SET m:lim 2 PX 50000");
        r = rs_cmd(&server, "SLUICE.EMQINCR m:lim 7000 %s", bad[i]);
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strstr(r->str, "now") != NULL);
        freeReplyObject(r);
        r = rs_cmd(&server, "SLUICE.EMQTTL m:lim m:none 3 %s", bad[i]);
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strstr(r->str, "now") != NULL);
        freeReplyObject(r);
        r = rs_cmd(&server, "GET m:lim");
        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, "2") == 0);
        freeReplyObject(r);
    }
    /* One argument too many for either. */
    CHECK(rs_ok(&server, "SLUICE.EMQINCR m:lim 7000 1 1") != 0);
    CHECK(rs_ok(&server, "SLUICE.EMQTTL m:lim m:none 3 1 1") != 0);
    test_context(NULL);
}

int main(void)
{
    if (mf_start(&server, NULL) < 0) {
        fprintf(stderr, "test_module_emq: cannot start redis-server with the "
                        "module\n");
        return 1;
    }
    if (!CHECK(rs_ok(&server, "SCRIPT LOAD %s",
                     sluice__script_emq_incr.text) == 0 &&
               rs_ok(&server, "SCRIPT LOAD %s",
                     sluice__script_emq_ttl.text) == 0))
        return test_summary("test_module_emq");
    test_incr();
    test_ttl();
    test_ttl_wait();
    test_bad_now();
    rs_stop(&server);
    return test_summary("test_module_emq");
}
