/*
 * test_module_keys.c - the module's commands name their keys exactly (key
 * specs, SetCommandInfo), so that the server routes and guards them as its
 * own commands:
 *
 *   - COMMAND GETKEYS gives exactly the keys of each command, whatever
 *     options come before them; COMMAND INFO gives each its flags;
 *   - an ACL user restricted to ~sluice:* gets NOPERM for any other key,
 *     through every command, and nothing is written;
 *   - in a cluster of three masters of its own, all with the module, a key
 *     of another node answers MOVED and keys of two slots CROSSSLOT, while
 *     keys of one slot (a hashtag) are served.
 */
#include "cluster.h"
#include "module_fixture.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* COMMAND GETKEYS of 'cmd' (space-separated) answers exactly 'want'
   (space-separated; "" for an error: no key). */
static void getkeys(const char *cmd, const char *want)
{
    const char *argv[32];
    size_t lens[32];
    char buf[512], got[512] = "";
    int argc = 2;
    redisReply *r;

    argv[0] = "COMMAND";
    argv[1] = "GETKEYS";
    snprintf(buf, sizeof(buf), "%s", cmd);
    for (char *t = strtok(buf, " "); t != NULL && argc < 32;
         t = strtok(NULL, " "))
        argv[argc++] = t;
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    r = rs_cmdargv(&server, argc, argv, lens);
    if (!CHECK(r != NULL))
        return;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
                     i == 0 ? "" : " ", r->element[i]->str);
    test_context("GETKEYS %s", cmd);
    CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "  got '%s', want '%s'\n", got, want);
    test_context(NULL);
    freeReplyObject(r);
}

static void test_getkeys(void)
{
    getkeys("SLUICE.HIT k1 fixed 3 1000", "k1");
    getkeys("SLUICE.HIT k1 gcra 3 1000 COST 2 BURST 2 PEEK NOW 5", "k1");
    getkeys("SLUICE.HITMANY fixed 3 1000 KEYS a 1 b 2 c 3", "a b c");
    getkeys("SLUICE.HITMANY gcra 3 1000 BURST 2 PEEK NOW 9 KEYS a 1 KEYS 2",
            "a KEYS");
    getkeys("SLUICE.RESET a b c", "a b c");
    getkeys("SLUICE.EMQINCR emq:{q}:limiter 1000", "emq:{q}:limiter");
    getkeys("SLUICE.EMQTTL emq:{q}:limiter emq:{q}:meta 5",
            "emq:{q}:limiter emq:{q}:meta");
    getkeys("SLUICE.EMQTTL emq:{q}:limiter emq:{q}:meta",
            "emq:{q}:limiter emq:{q}:meta");
    /* The caller's clock is no key. */
    getkeys("SLUICE.EMQINCR emq:{q}:limiter 1000 5", "emq:{q}:limiter");
    getkeys("SLUICE.EMQTTL emq:{q}:limiter emq:{q}:meta 5 7",
            "emq:{q}:limiter emq:{q}:meta");
}

/* COMMAND INFO 'name' lists every flag of 'flags' (space-separated). */
static void has_flags(const char *name, const char *flags)
{
    redisReply *r = rs_cmd(&server, "COMMAND INFO %s", name);
    char buf[128];

    test_context("COMMAND INFO %s", name);
    if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
               r->element[0]->type == REDIS_REPLY_ARRAY &&
               r->element[0]->elements >= 3)) {
        if (r != NULL)
            freeReplyObject(r);
        return;
    }
    snprintf(buf, sizeof(buf), "%s", flags);
    for (char *f = strtok(buf, " "); f != NULL; f = strtok(NULL, " ")) {
        const redisReply *got = r->element[0]->element[2];
        int found = 0;

        for (size_t i = 0; i < got->elements; i++)
            found |= strcmp(got->element[i]->str, f) == 0;
        CHECK(found);
    }
    test_context(NULL);
    freeReplyObject(r);
}

/* The first key spec of 'name' (COMMAND INFO's ninth field) has every
   flag of 'flags' and no other. */
static void spec_flags(const char *name, const char *flags)
{
    redisReply *r = rs_cmd(&server, "COMMAND INFO %s", name);
    const redisReply *spec, *got = NULL;
    char buf[128];
    int want = 0;

    test_context("key spec of %s", name);
    if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY &&
               r->element[0]->type == REDIS_REPLY_ARRAY &&
               r->element[0]->elements >= 9 &&
               r->element[0]->element[8]->elements >= 1)) {
        if (r != NULL)
            freeReplyObject(r);
        return;
    }
    spec = r->element[0]->element[8]->element[0];
    for (size_t i = 0; i + 1 < spec->elements; i += 2)
        if (strcmp(spec->element[i]->str, "flags") == 0)
            got = spec->element[i + 1];
    snprintf(buf, sizeof(buf), "%s", flags);
    for (char *f = strtok(buf, " "); f != NULL; f = strtok(NULL, " ")) {
        int found = 0;

        want++;
        for (size_t i = 0; got != NULL && i < got->elements; i++)
            found |= strcmp(got->element[i]->str, f) == 0;
        CHECK(found);
    }
    CHECK(got != NULL && got->elements == (size_t)want);
    test_context(NULL);
    freeReplyObject(r);
}

static void test_flags(void)
{
    spec_flags("sluice.hit", "RW access update");
    spec_flags("sluice.hitmany", "RW access update");
    spec_flags("sluice.reset", "RW delete");
    spec_flags("sluice.emqincr", "RW access update");
    spec_flags("sluice.emqttl", "RO access");
    has_flags("sluice.hit", "write denyoom");
    has_flags("sluice.hitmany", "write denyoom movablekeys");
    has_flags("sluice.reset", "write");
    has_flags("sluice.emqincr", "write denyoom");
    has_flags("sluice.emqttl", "readonly");
    has_flags("sluice.version", "readonly fast");
}

/* Runs 'cmd' as the restricted user; true when it answered 'prefix'. */
static int as_user(redisContext *u, const char *cmd, const char *prefix)
{
    redisReply *r = redisCommand(u, cmd);
    int ok;

    if (r == NULL)
        return 0;
    ok = prefix == NULL ? r->type != REDIS_REPLY_ERROR
                        : r->type == REDIS_REPLY_ERROR &&
                              strncmp(r->str, prefix, strlen(prefix)) == 0;
    if (!ok)
        fprintf(stderr, "  %s: %s\n", cmd,
                r->type == REDIS_REPLY_ERROR ? r->str : "(no error)");
    freeReplyObject(r);
    return ok;
}

static void test_acl(void)
{
    redisContext *u;
    redisReply *r;

    CHECK(rs_ok(&server, "ACL SETUSER lim on >pw ~sluice:* +@all") == 0);
    u = redisConnect("127.0.0.1", server.port);
    if (!CHECK(u != NULL && !u->err))
        return;
    r = redisCommand(u, "AUTH lim pw");
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    rs_ok(&server, "SET other:held 1");
    CHECK(as_user(u, "SLUICE.HIT sluice:a fixed 3 1000", NULL));
    CHECK(as_user(u, "SLUICE.HIT other:a fixed 3 1000", "NOPERM"));
    CHECK(as_user(u, "SLUICE.HIT other:a gcra 3 1000 PEEK", "NOPERM"));
    CHECK(as_user(u, "SLUICE.HITMANY fixed 3 1000 KEYS sluice:a 1 sluice:b 1",
                  NULL));
    CHECK(as_user(u, "SLUICE.HITMANY fixed 3 1000 KEYS sluice:a 1 other:b 1",
                  "NOPERM"));
    CHECK(as_user(u, "SLUICE.RESET sluice:b other:held", "NOPERM"));
    CHECK(as_user(u, "SLUICE.EMQINCR other:lim 1000", "NOPERM"));
    CHECK(as_user(u, "SLUICE.EMQTTL sluice:lim other:meta", "NOPERM"));
    CHECK(as_user(u, "SLUICE.EMQTTL sluice:lim sluice:meta", NULL));
    /* Nothing written where the user may not write. */
    CHECK_EQ_U64(rs_int(&server, "EXISTS other:a other:b other:lim"), 0);
    CHECK_EQ_U64(rs_int(&server, "EXISTS other:held sluice:b"), 2);
    r = rs_cmd(&server, "GET sluice:a");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0);
    freeReplyObject(r);
    redisFree(u);
}

/* Two keys of different slots served by different masters. */
static void test_cluster(void)
{
    const char *extra[] = {"--loadmodule", rs_module_path(), NULL};
    rc_cluster c;
    int sa, sb, owner, other;
    redisReply *r;

    if (!CHECK(rc_start(&c, 3, 0, extra) == 0))
        return;
    sa = rc_keyslot(&c, "a", 1);
    sb = rc_keyslot(&c, "b", 1);
    owner = c.owner[sa];
    other = c.owner[sa] == c.owner[sb] ? (owner + 1) % 3 : c.owner[sb];
    CHECK(owner >= 0 && other >= 0 && owner != other);
    r = rs_cmd(&c.nodes[other].srv, "SLUICE.HIT a fixed 3 1000");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
          strncmp(r->str, "MOVED", 5) == 0);
    freeReplyObject(r);
    r = rs_cmd(&c.nodes[other].srv, "SLUICE.HITMANY fixed 3 1000 KEYS a 1");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
          strncmp(r->str, "MOVED", 5) == 0);
    freeReplyObject(r);
    r = rs_cmd(&c.nodes[other].srv, "SLUICE.EMQINCR a 1000");
    CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
          strncmp(r->str, "MOVED", 5) == 0);
    freeReplyObject(r);
    r = rs_cmd(&c.nodes[owner].srv, "SLUICE.HIT a fixed 3 1000");
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    freeReplyObject(r);
    for (int i = 0; i < 3; i++) {
        r = rs_cmd(&c.nodes[i].srv, "SLUICE.HITMANY fixed 3 1000 KEYS a 1 b 1");
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strncmp(r->str, "CROSSSLOT", 9) == 0);
        freeReplyObject(r);
        r = rs_cmd(&c.nodes[i].srv, "SLUICE.RESET a b");
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strncmp(r->str, "CROSSSLOT", 9) == 0);
        freeReplyObject(r);
        r = rs_cmd(&c.nodes[i].srv, "SLUICE.EMQTTL {x}a {y}b");
        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strncmp(r->str, "CROSSSLOT", 9) == 0);
        freeReplyObject(r);
    }
    owner = c.owner[rc_keyslot(&c, "{q}x", 4)];
    r = rs_cmd(&c.nodes[owner].srv,
               "SLUICE.HITMANY gcra 3 1000 KEYS {q}x 1 {q}y 2");
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 8);
    freeReplyObject(r);
    rc_stop(&c);
}

int main(void)
{
    if (mf_start(&server, NULL) < 0) {
        fprintf(stderr, "test_module_keys: cannot start redis-server with "
                        "the module\n");
        return 1;
    }
    test_getkeys();
    test_flags();
    test_acl();
    rs_stop(&server);
    test_cluster();
    return test_summary("test_module_keys");
}
