/*
 * test_valkey_auth.c - the Valkey store logs in and picks its database on
 * a real redis-server: no password, a wrong one (SLUICE_EAUTH whatever the
 * failure policy, and no half-open connection after it), the right one, an
 * ACL user, a password that needs escapes in a URL, a user without access
 * to the keys (the server's NOPERM); the database in the URL, selected
 * again after a reconnection, and one the server does not have.
 */
#include "server.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

static rs_server server;

/* No password, and a wrong one: errors, never decisions. */
static void auth_refused(rs_server *as, const sluice_limit *lim)
{
    sluice_store *st = NULL;
    sluice_decision d;
    char url[256];
    int rc;

    /* No password: the server says NOAUTH, and the message shows it; a
       refused login has its own code (issue 20), never an outage's. */
    snprintf(url, sizeof(url), "%s?timeout=2000&on_error=open", as->url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    rc = sluice_hit(&d, st, lim, "a", 1, 1);
    CHECK_RC(rc, SLUICE_EAUTH);
    CHECK(strstr(sluice_last_error(), "NOAUTH") != NULL);
    CHECK(!d.allowed);
    sluice_store_free(st);

    /* A wrong password: a clear error, not a decision, whatever the
       policy (a refused login is not an unreachable server). */
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d?on_error=open",
             as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    rc = sluice_hit(&d, st, lim, "a", 1, 1);
    CHECK_RC(rc, SLUICE_EAUTH);
    CHECK(!d.allowed);
    if (!CHECK(strstr(sluice_last_error(), "AUTH") != NULL &&
               (strstr(sluice_last_error(), "WRONGPASS") != NULL ||
                strstr(sluice_last_error(), "invalid") != NULL)))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    /* Again: a refused AUTH must not leave a half-open connection that
       later calls would use unauthenticated. */
    CHECK_RC(sluice_hit(&d, st, lim, "a", 1, 1), SLUICE_EAUTH);
    CHECK(strstr(sluice_last_error(), "AUTH") != NULL);
    sluice_store_free(st);
}

/* The right password, ACL users, and a user without access. */
static void auth_users(rs_server *as, const sluice_limit *lim)
{
    sluice_store *st = NULL;
    sluice_decision d;
    char url[256];

    snprintf(url, sizeof(url), "redis://:secret@127.0.0.1:%d", as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, lim, "a", 1, 1));
    CHECK(d.allowed);
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, "q", 1, 60000));
    sluice_store_free(st);

    /* An ACL user, and one whose password needs escapes in a URL. */
    snprintf(url, sizeof(url), "redis://alice:pw@127.0.0.1:%d", as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, lim, "a", 1, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 8);
    sluice_store_free(st);
    snprintf(url, sizeof(url),
             "redis://bob:p%%40ss%%3Aw%%2Frd%%25x@127.0.0.1:%d", as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, lim, "a", 1, 1));
    CHECK_EQ_U64(d.remaining, 7);
    sluice_store_free(st);
    snprintf(url, sizeof(url), "redis://alice:nope@127.0.0.1:%d", as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_RC(sluice_hit(&d, st, lim, "a", 1, 1), SLUICE_EAUTH);
    sluice_store_free(st);

    /* A user without access to the keys: the server's NOPERM, as it is. */
    snprintf(url, sizeof(url), "redis://carol:pw@127.0.0.1:%d", as->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_RC(sluice_hit(&d, st, lim, "a", 1, 1), SLUICE_EPROTO);
    if (!CHECK(strstr(sluice_last_error(), "NOPERM") != NULL ||
               strstr(sluice_last_error(), "permission") != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    sluice_store_free(st);
}

/* A server of its own, with a password and three ACL users. */
static void test_auth(void)
{
    static const char *const args[] = {"--requirepass", "secret", NULL};
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    rs_server as;

    test_context("AUTH");
    if (!CHECK(rs_start(&as, args) == 0))
        return;
    CHECK(rs_ok(&as, "ACL SETUSER alice on >pw ~* +@all") == 0);
    CHECK(rs_ok(&as, "ACL SETUSER bob on >p@ss:w/rd%%x ~* +@all") == 0);
    CHECK(rs_ok(&as, "ACL SETUSER carol on >pw ~other:* +@all") == 0);
    auth_refused(&as, &lim);
    auth_users(&as, &lim);
    rs_stop(&as);
    test_context(NULL);
}

static void test_database(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    sluice_store *st = NULL;
    sluice_decision d;
    char url[256];

    test_context("database selection");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s/3?timeout=2000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, &lim, "dbkey", 5, 1));
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, "dbq", 3, 60000));
    CHECK(rs_int(&server, "EXISTS sluice:{dbkey}:fixed") == 0);
    CHECK(rs_ok(&server, "SELECT 3") == 0);
    CHECK(rs_int(&server, "EXISTS sluice:{dbkey}:fixed") == 1);
    CHECK(rs_int(&server, "EXISTS emq:{dbq}:limiter") == 1);
    CHECK(rs_int(&server, "DBSIZE") == 2);
    CHECK(rs_ok(&server, "SELECT 0") == 0);
    CHECK(rs_int(&server, "DBSIZE") == 0);
    /* Reconnections select the database again. */
    CHECK(rs_ok(&server, "CLIENT KILL TYPE normal SKIPME yes") == 0);
    CHECK_OK(sluice_hit(&d, st, &lim, "dbkey", 5, 1));
    CHECK_EQ_U64(d.remaining, 8);
    CHECK(rs_int(&server, "DBSIZE") == 0);
    sluice_store_free(st);

    /* A database the server does not have: its error, as it is. */
    snprintf(url, sizeof(url), "%s/99?timeout=2000", server.url);
    st = NULL;
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_RC(sluice_hit(&d, st, &lim, "dbkey", 5, 1), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "SELECT") != NULL);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_auth: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_auth: server %s (pid %d)\n", server.url,
           (int)server.pid);
    test_database();
    test_auth();
    rs_stop(&server);
    return test_summary("test_valkey_auth");
}
