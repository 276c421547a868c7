/*
 * test_harness_transports.c - the launcher's other transports are what
 * they claim, checked with the build's own tools (redis-cli, openssl), not
 * with the library: the run's certificates (openssl verify), a TLS-only
 * server with and without client certificates, one serving the expired
 * certificate, a Unix-socket server, a TLS cluster, and a master with a
 * replica watched by redis-sentinel, through a SENTINEL FAILOVER.
 */
#include "cluster.h"
#include "server.h"
#include "test.h"
#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPENSSL_MS 10000

/* ---- Helpers ------------------------------------------------------------- */

/* Runs 'argv'; its exit status, and its output in 'out'. */
static int run(const char *const *argv, char *out, size_t cap)
{
    return rs_run(argv, out, cap, OPENSSL_MS);
}

/* The CLI at 's' answers 'want' to 'args' (a NULL-terminated list). */
static int cli_says(rs_server *s, const char *const *args, const char *want)
{
    char out[4096];
    int rc = rs_cli(s, args, out, sizeof(out));

    if (rc != 0 || strstr(out, want) == NULL) {
        fprintf(stderr, "    redis-cli %s: exit %d: %s\n", args[0], rc, out);
        return 0;
    }
    return 1;
}

/* The server's CONFIG GET 'name' is 'want'. */
static int config_is(rs_server *s, const char *name, const char *want)
{
    redisReply *r = rs_cmd(s, "CONFIG GET %s", name);
    int is = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             strcmp(r->element[1]->str, want) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return is;
}

/* The answer of 's' to 'cmd' (INFO replication...) holds 'want'. */
static int info_has(rs_server *s, const char *cmd, const char *want)
{
    redisReply *r = rs_cmd(s, cmd);
    int has = r != NULL && r->type == REDIS_REPLY_STRING &&
              strstr(r->str, want) != NULL;

    if (r != NULL)
        freeReplyObject(r);
    return has;
}

/* A plain (not TLS) PING at TCP 'port' gets no PONG. */
static int plain_ping_fails(int port)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r = NULL;
    int fails;

    if (c != NULL && c->err == 0) {
        redisSetTimeout(c, tv);
        r = redisCommand(c, "PING");
    }
    fails = r == NULL || r->type != REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    return fails;
}

/* ---- The certificates ---------------------------------------------------- */

static void test_certs(const rs_certs *c)
{
    char out[4096];
    const char *ok[] = {"openssl", "verify", "-CAfile", c->ca_cert,
                        "-verify_hostname", "localhost", "-verify_ip",
                        "127.0.0.1", c->server_cert, NULL};
    const char *client[] = {"openssl", "verify", "-CAfile", c->ca_cert,
                            "-purpose", "sslclient", c->client_cert, NULL};
    const char *other[] = {"openssl", "verify", "-CAfile", c->other_ca_cert,
                           c->server_cert, NULL};
    const char *expired[] = {"openssl", "verify", "-CAfile", c->ca_cert,
                             c->expired_cert, NULL};
    const char *wrong[] = {"openssl", "verify", "-CAfile", c->ca_cert,
                           "-verify_hostname", "localhost",
                           c->wrong_name_cert, NULL};
    const char *wrong_ok[] = {"openssl", "verify", "-CAfile", c->ca_cert,
                              c->wrong_name_cert, NULL};

    test_context("certificates in %s", c->dir);
    CHECK(run(ok, out, sizeof(out)) == 0 && strstr(out, ": OK") != NULL);
    CHECK(run(client, out, sizeof(out)) == 0 && strstr(out, ": OK") != NULL);
    CHECK(run(other, out, sizeof(out)) != 0 &&
          strstr(out, "unable to get local issuer certificate") != NULL);
    CHECK(run(expired, out, sizeof(out)) != 0 &&
          strstr(out, "certificate has expired") != NULL);
    CHECK(run(wrong, out, sizeof(out)) != 0 &&
          strstr(out, "hostname mismatch") != NULL);
    /* Signed by the CA all the same: only its name is wrong. */
    CHECK(run(wrong_ok, out, sizeof(out)) == 0);
    /* The same run, the same files. */
    CHECK(rs_certs_get() == c);
    test_context(NULL);
}

/* ---- TLS ----------------------------------------------------------------- */

/* A server that requires a client certificate, and one that does not. */
static void test_tls(const rs_certs *c)
{
    static const char *const ping[] = {"PING", NULL};
    rs_server s;
    char port[16], out[4096];
    const char *no_cert[] = {rs_binary(RS_PROGRAM_CLI), "-h", "127.0.0.1",
                             "-p", port, "--tls", "--cacert", c->ca_cert,
                             "PING", NULL};

    CHECK(rs_start_tls(&s, "yes", NULL) == 0);
    snprintf(port, sizeof(port), "%d", s.port);
    test_context("TLS server %s, tls-auth-clients yes", s.url);
    CHECK(strncmp(s.url, "rediss://127.0.0.1:", 19) == 0);
    CHECK(cli_says(&s, ping, "PONG"));
    CHECK(plain_ping_fails(s.port));
    /* The helper's commands reach it through its socket; no plain port. */
    CHECK(config_is(&s, "port", "0"));
    CHECK(config_is(&s, "tls-port", port));
    CHECK(config_is(&s, "tls-auth-clients", "yes"));
    /* Without a client certificate the handshake is refused. */
    CHECK(run(no_cert, out, sizeof(out)) != 0 ||
          strstr(out, "PONG") == NULL);
    CHECK(rs_restart(&s) == 0 && cli_says(&s, ping, "PONG"));
    rs_stop(&s);

    CHECK(rs_start_tls(&s, "no", NULL) == 0);
    snprintf(port, sizeof(port), "%d", s.port);
    test_context("TLS server %s, tls-auth-clients no", s.url);
    CHECK(run(no_cert, out, sizeof(out)) == 0 &&
          strstr(out, "PONG") != NULL);
    rs_stop(&s);
    test_context(NULL);
}

/* A server presenting the expired certificate: what openssl sees. */
static void test_tls_expired(const rs_certs *c)
{
    const char *extra[] = {"--tls-cert-file", c->expired_cert,
                           "--tls-key-file", c->expired_key, NULL};
    rs_server s;
    char addr[32], out[16384];
    const char *sc[] = {"openssl", "s_client", "-connect", addr, "-CAfile",
                        c->ca_cert, "-verify_return_error", "-brief", NULL};

    CHECK(rs_start_tls(&s, "no", extra) == 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", s.port);
    test_context("TLS server %s with the expired certificate", s.url);
    CHECK(run(sc, out, sizeof(out)) != 0 &&
          strstr(out, "certificate has expired") != NULL);
    rs_stop(&s);
    test_context(NULL);
}

/* ---- A Unix socket ------------------------------------------------------- */

static void test_unix(void)
{
    static const char *const ping[] = {"PING", NULL};
    rs_server s;
    char want[400];

    CHECK(rs_start_unix(&s, NULL) == 0);
    test_context("Unix-socket server %s", s.url);
    snprintf(want, sizeof(want), "unix://%s/redis.sock", s.dir);
    CHECK(strcmp(s.url, want) == 0);
    CHECK(s.port == 0);
    CHECK(cli_says(&s, ping, "PONG"));
    CHECK(config_is(&s, "port", "0"));
    CHECK(config_is(&s, "unixsocketperm", "700"));
    CHECK(rs_restart(&s) == 0 && cli_says(&s, ping, "PONG"));
    rs_stop(&s);
    test_context(NULL);
}

/* ---- A port another server holds ------------------------------------------ */

/*
 * A restart on a port another test's server took meanwhile: ours cannot
 * bind it and exits, and the other one answers PING at once. The launcher
 * must say it did not start, not hand the other server to the test.
 */
static void test_port_taken(void)
{
    rs_server holder, s;
    int port;

    CHECK(rs_start(&holder, NULL) == 0);
    CHECK(rs_start(&s, NULL) == 0);
    port = s.port;
    rs_kill(&s);
    s.port = holder.port;
    fprintf(stderr, "    (a launch on a held port: the failure below is "
            "the one checked)\n");
    CHECK(rs_restart(&s) == -1);
    s.port = port;
    CHECK(rs_restart(&s) == 0);
    CHECK(s.pid > 0);
    rs_stop(&s);
    rs_stop(&holder);
}

/* ---- A TLS cluster ------------------------------------------------------- */

static void test_tls_cluster(void)
{
    rc_cluster c;
    uint64_t t0 = rs_mono_ms();
    int m;

    if (!CHECK(rc_start_tls(&c, 3, 1, "yes", NULL) == 0))
        return;
    printf("test_harness_transports: TLS cluster %s ready in %llu ms\n",
           c.url, (unsigned long long)(rs_mono_ms() - t0));
    test_context("TLS cluster %s", c.url);
    CHECK(strncmp(c.url, "rediss+cluster://127.0.0.1:", 27) == 0);
    for (int i = 0; i < c.n; i++) {
        CHECK(config_is(&c.nodes[i].srv, "port", "0"));
        CHECK(config_is(&c.nodes[i].srv, "tls-cluster", "yes"));
        CHECK(config_is(&c.nodes[i].srv, "tls-replication", "yes"));
        CHECK(plain_ping_fails(c.nodes[i].srv.port));
    }
    /* Every node answers over TLS, the replicas' links are up over TLS
       (rc_start_tls() waited for them), and a reshard runs over TLS. */
    m = rc_first_live(&c, 1);
    {
        static const char *const info[] = {"CLUSTER", "INFO", NULL};

        CHECK(cli_says(&c.nodes[m].srv, info, "cluster_state:ok"));
    }
    {
        int masters[RC_MAX_NODES];

        CHECK(rc_masters_by_slot(&c, masters) == 3);
        CHECK(rc_reshard(&c, masters[0], masters[1], 10) == 0);
    }
    rc_stop(&c);
    test_context(NULL);
}

/* ---- Sentinel ------------------------------------------------------------ */

static void test_sentinel(void)
{
    rs_sentinel st;
    uint64_t t0 = rs_mono_ms();
    char want[96];

    if (!CHECK(rs_sentinel_start(&st, NULL, NULL) == 0))
        return;
    test_context("sentinel on port %d", st.sentinel.port);
    snprintf(want, sizeof(want), "valkey+sentinel://127.0.0.1:%d/%s",
             st.sentinel.port, RS_SENTINEL_MASTER);
    CHECK(strcmp(st.url, want) == 0);
    CHECK(rs_sentinel_master_port(&st) == st.nodes[0].port);
    CHECK(rs_sentinel_master(&st) == &st.nodes[0]);
    CHECK(info_has(&st.nodes[1], "INFO replication", "role:slave"));
    printf("test_harness_transports: sentinel %s ready in %llu ms\n", st.url,
           (unsigned long long)(rs_mono_ms() - t0));

    t0 = rs_mono_ms();
    CHECK(rs_sentinel_failover(&st) == st.nodes[1].port);
    printf("test_harness_transports: SENTINEL FAILOVER named port %d "
           "(the former replica) after %llu ms\n", st.nodes[1].port,
           (unsigned long long)(rs_mono_ms() - t0));
    CHECK(rs_sentinel_master(&st) == &st.nodes[1]);
    CHECK(info_has(&st.nodes[1], "INFO replication", "role:master"));
    /* The former master comes back as its replica. */
    CHECK(rs_sentinel_wait_seen(&st, RS_SENTINEL_READY_TIMEOUT_MS) == 0);
    CHECK(info_has(&st.nodes[0], "INFO replication", "role:slave"));
    rs_sentinel_stop(&st);
    test_context(NULL);
}

int main(void)
{
    const rs_certs *c = rs_certs_get();

    if (c == NULL) {
        fprintf(stderr, "test_harness_transports: no certificates\n");
        return 1;
    }
    printf("test_harness_transports: certificates in %s\n", c->dir);
    test_certs(c);
    test_tls(c);
    test_tls_expired(c);
    test_unix();
    test_port_taken();
    test_tls_cluster();
    test_sentinel();
    return test_summary("test_harness_transports");
}
