/*
 * test_valkey_transports.c - the Valkey store over TLS and a Unix socket,
 * on real redis-servers (the launcher's TLS-only and socket-only servers,
 * the run's certificates: tls_certs.h).
 *
 * - TLS: decisions as on TCP (a budget spent and refused; a batch, a
 *   request against two limits, the Functions library loaded), mutual TLS
 *   with the client certificate, tls_server_name, and tls_insecure.
 * - Every misconfiguration is its own clear error, SLUICE_EAUTH, never
 *   admitted under on_error=open: a CA that signed nothing of the server's,
 *   an expired certificate, a name that does not match, a missing client
 *   certificate, TLS to a plain port; TLS options on a plain URL are
 *   refused when the store opens.
 * - A server that accepts and then stalls mid-handshake costs the connect
 *   timeout and no more.
 * - Unix sockets: decisions, the database option, and a path that is no
 *   socket (an outage, ECONN).
 *
 * The differential tests run over each transport too: test_valkey_diff
 * with SLUICE_TEST_TRANSPORT=tls or unix (tests/CMakeLists.txt).
 */
#include "server.h"
#include "stores.h"
#include "test.h"
#include "tls_certs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const sluice_limit lim = {.algo = SLUICE_FIXED, .max = 3,
                                 .window_ms = 60000};

/* The store at the URL that 'fmt' and 'ap' make (printf-style); NULL when
   it does not open (a failed check). */
static sluice_store *open_vf(const char *fmt, va_list ap)
{
    char url[1400];
    sluice_store *st = NULL;

    vsnprintf(url, sizeof(url), fmt, ap);
    return CHECK_OK(sluice_store_open(&st, url, NULL)) ? st : NULL;
}

/* Opens the URL 'fmt' makes, hits 'key' four times: three admitted, the
   fourth refused. */
static void spend(const char *key, const char *fmt, ...)
{
    sluice_store *st;
    sluice_decision d;
    va_list ap;

    va_start(ap, fmt);
    st = open_vf(fmt, ap);
    va_end(ap);
    if (st == NULL)
        return;
    for (int i = 0; i < 4; i++) {
        if (!CHECK_OK(sluice_hit(&d, st, &lim, key, strlen(key), 1))) {
            fprintf(stderr, "    %s\n", sluice_last_error());
            break;
        }
        CHECK(d.allowed == (i < 3));
    }
    sluice_store_free(st);
}

/*
 * Opens the URL 'fmt' makes (most with on_error=open) and hits: the call
 * must fail with 'want', its message holding 'says', nothing admitted and
 * no policy standing in.
 */
static void refused(int want, const char *says, const char *fmt, ...)
{
    sluice_store *st;
    sluice_decision d;
    va_list ap;
    int rc;

    va_start(ap, fmt);
    st = open_vf(fmt, ap);
    va_end(ap);
    if (st == NULL)
        return;
    rc = sluice_hit(&d, st, &lim, "k", 1, 1);
    CHECK_RC(rc, want);
    CHECK(!d.allowed);
    CHECK(d.fallback != SLUICE_FELL_OPEN);
    if (!CHECK(strstr(sluice_last_error(), says) != NULL))
        fprintf(stderr, "    wanted '%s' in: %s\n", says, sluice_last_error());
    sluice_store_free(st);
}

/*
 * The other callers over the store at 'url': a batch (sluice_hit_many), a
 * request against two limits at once (sluice_hit_all) and the Functions
 * library loaded (sluice_functions_load), then FCALL'd.
 */
static void other_callers(rs_server *s, const char *url)
{
    const sluice_limit two[2] = {SLUICE_LIMIT(SLUICE_FIXED, 2, 60000),
                                 SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 60000)};
    sluice_request reqs[3] = {{"m1", 2, 1, 0, {0}}, {"m2", 2, 1, 0, {0}},
                              {"m1", 2, 1, 0, {0}}};
    sluice_decision all, each[2];
    sluice_store *st = NULL;
    size_t servers = 0;
    redisReply *r;

    if (!CHECK_OK(sluice_store_open(&st, url, NULL)))
        return;
    CHECK_OK(sluice_hit_many(st, &lim, reqs, 3));
    for (int i = 0; i < 3; i++)
        CHECK(reqs[i].err == 0 && reqs[i].decision.allowed);
    CHECK_EQ_U64(reqs[2].decision.remaining, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_hit_all(&all, each, st, two, 2, "all", 3, 1));
        CHECK(all.allowed == (i < 2)); /* the fixed window's 2 */
    }
    CHECK_OK(sluice_functions_load(st, &servers));
    CHECK_EQ_U64(servers, 1);
    r = rs_cmd(s, "FCALL sluice_version 0");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
          strcmp(r->str, sluice_functions_version()) == 0);
    freeReplyObject(r);
    sluice_store_free(st);
}

/* ---- TLS ---------------------------------------------------------------- */

static void test_tls(const rs_certs *c)
{
    rs_server s, m, plain;
    char url[1400];

    test_context("TLS");
    if (!CHECK(rs_start_tls(&s, "no", NULL) == 0))
        return;
    spend("a", "%s?tls_ca=%s", s.url, c->ca_cert);
    snprintf(url, sizeof(url), "%s?tls_ca=%s", s.url, c->ca_cert);
    other_callers(&s, url);
    spend("b", "rediss://localhost:%d?tls_ca=%s", s.port, c->ca_cert);
    spend("c", "valkeys://127.0.0.1:%d?tls_ca=%s&tls_server_name=localhost",
          s.port, c->ca_cert);
    /* The wrong CA, the system's (which never signed the test CA), a name
       that is not the certificate's. */
    refused(SLUICE_EAUTH, "certificate verify failed", "%s?tls_ca=%s&"
            "on_error=open", s.url, c->other_ca_cert);
    refused(SLUICE_EAUTH, "certificate verify failed", "%s?on_error=open",
            s.url);
    refused(SLUICE_EAUTH, "hostname mismatch", "%s?tls_ca=%s&"
            "tls_server_name=wrong.example&on_error=open", s.url, c->ca_cert);
    /* tls_insecure takes any: the warning in docs/stores.md is why. */
    spend("d", "%s?tls_ca=%s&tls_insecure=1", s.url, c->other_ca_cert);
    /* TLS to a plain port: a plain server waits for the end of a line
       that a ClientHello never has, so the handshake times out -- the same
       as a TLS server that stalls, bounded by the connect timeout (docs/errors.md
       says so). (Plain RESP to the TLS port is reset by the server: a
       connection closed, as by a proxy with no server behind it, so it
       stays ECONN.) */
    test_context("TLS to a plain port");
    if (CHECK(rs_start(&plain, NULL) == 0)) {
        uint64_t t0 = rs_mono_ms();

        refused(SLUICE_ETIMEDOUT, "TLS handshake",
                "rediss://127.0.0.1:%d?tls_ca=%s&connect_timeout=200",
                plain.port, c->ca_cert);
        CHECK(rs_mono_ms() - t0 < 600);
        rs_stop(&plain);
    }
    rs_stop(&s);

    test_context("mutual TLS");
    if (CHECK(rs_start_tls(&m, "yes", NULL) == 0)) {
        spend("e", "%s?tls_ca=%s&tls_cert=%s&tls_key=%s", m.url, c->ca_cert,
              c->client_cert, c->client_key);
        /* No client certificate: the server ends TLS (with an alert, which
           the reset that follows may lose) before its first reply. */
        refused(SLUICE_EAUTH, "client certificate", "%s?tls_ca=%s&"
                "on_error=open", m.url, c->ca_cert);
        rs_stop(&m);
    }
    test_context(NULL);
}

/* A server whose certificate is expired, or for another name. */
static void test_tls_bad_certs(const rs_certs *c)
{
    const char *expired[] = {"--tls-cert-file", c->expired_cert,
                             "--tls-key-file", c->expired_key, NULL};
    const char *wrong[] = {"--tls-cert-file", c->wrong_name_cert,
                           "--tls-key-file", c->wrong_name_key, NULL};
    rs_server s;

    test_context("an expired certificate");
    if (CHECK(rs_start_tls(&s, "no", expired) == 0)) {
        refused(SLUICE_EAUTH, "expired", "%s?tls_ca=%s&on_error=open", s.url,
                c->ca_cert);
        rs_stop(&s);
    }
    test_context("a certificate for another name");
    if (CHECK(rs_start_tls(&s, "no", wrong) == 0)) {
        refused(SLUICE_EAUTH, "hostname mismatch", "%s?tls_ca=%s&"
                "on_error=open", s.url, c->ca_cert);
        rs_stop(&s);
    }
    test_context(NULL);
}

/* TLS options where there is no TLS: refused when the store opens. */
static void test_tls_options_need_tls(const rs_certs *c)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *st = NULL;
    char url[600];

    test_context("TLS options without TLS");
    snprintf(url, sizeof(url), "valkey://127.0.0.1:1?tls_ca=%s", c->ca_cert);
    CHECK_RC(sluice_store_open(&st, url, NULL), SLUICE_EURL);
    CHECK(strstr(sluice_last_error(), "need TLS") != NULL);
    o.tls_ca_file = c->ca_cert;
    CHECK_RC(sluice_store_open(&st, "valkey://127.0.0.1:1", &o), SLUICE_EINVAL);
    CHECK(st == NULL);
    /* A CA file that is not there: clear, at open. */
    o.tls_ca_file = "/nonexistent/ca.pem";
    CHECK_RC(sluice_store_open(&st, "valkeys://127.0.0.1:1", &o),
             SLUICE_ECONFIG);
    CHECK(strstr(sluice_last_error(), "/nonexistent/ca.pem") != NULL);
    test_context(NULL);
}

/*
 * A peer that accepts the connection and never answers the ClientHello:
 * the call ends at the connect timeout, not later.
 */
static void test_handshake_stall(const rs_certs *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    uint64_t t0, took;

    test_context("a handshake that stalls");
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
               listen(fd, 4) == 0 &&
               getsockname(fd, (struct sockaddr *)&a, &len) == 0)) {
        if (fd >= 0)
            close(fd);
        return;
    }
    /* The kernel completes the TCP handshake (the backlog); nothing ever
       reads the ClientHello. */
    t0 = rs_mono_ms();
    refused(SLUICE_ETIMEDOUT, "TLS handshake", "rediss://127.0.0.1:%d?"
            "tls_ca=%s&connect_timeout=200&timeout=2000", ntohs(a.sin_port),
            c->ca_cert);
    took = rs_mono_ms() - t0;
    printf("  a stalled handshake ended after %llu ms (connect_timeout "
           "200)\n", (unsigned long long)took);
    CHECK(took >= 190 && took < 600);
    close(fd);
    test_context(NULL);
}

/* ---- Unix sockets ------------------------------------------------------- */

static void test_unix(void)
{
    rs_server s;
    sluice_store *st = NULL;
    sluice_decision d;
    char url[400];

    test_context("a Unix socket");
    if (!CHECK(rs_start_unix(&s, NULL) == 0))
        return;
    spend("u", "%s", s.url);
    other_callers(&s, s.url);
    spend("v", "valkey+unix://%s", s.url + strlen("unix://"));
    /* The database option: the key is in db 3, not 0. */
    snprintf(url, sizeof(url), "redis+unix://%s?db=3&prefix=u3",
             s.url + strlen("unix://"));
    if (CHECK_OK(sluice_store_open(&st, url, NULL))) {
        CHECK_OK(sluice_hit(&d, st, &lim, "w", 1, 1));
        sluice_store_free(st);
    }
    CHECK_EQ_U64(rs_int(&s, "EXISTS u3:{w}:fixed"), 0);
    rs_ok(&s, "SELECT 3");
    CHECK_EQ_U64(rs_int(&s, "EXISTS u3:{w}:fixed"), 1);
    rs_ok(&s, "SELECT 0");
    /* A path with no server: an outage (ECONN), which a policy may stand
       in for; a relative path: a bad URL. */
    snprintf(url, sizeof(url), "unix://%s/none.sock", s.dir);
    if (CHECK_OK(sluice_store_open(&st, url, NULL))) {
        CHECK_RC(sluice_hit(&d, st, &lim, "x", 1, 1), SLUICE_ECONN);
        sluice_store_free(st);
    }
    CHECK_RC(sluice_store_open(&st, "unix://relative.sock", NULL),
             SLUICE_EURL);
    rs_stop(&s);
    test_context(NULL);
}

int main(void)
{
    const rs_certs *c = rs_certs_get();

    if (c == NULL) {
        fprintf(stderr, "test_valkey_transports: no certificates\n");
        return 1;
    }
    test_tls(c);
    test_tls_bad_certs(c);
    test_tls_options_need_tls(c);
    test_handshake_stall(c);
    test_unix();
    return test_summary("test_valkey_transports");
}
