/*
 * test_tls_hostile.c - a server store against a hostile peer over TLS
 * (issue 20): the bounds tests/timed/test_hostile.c checks on plain TCP hold
 * when the bytes come through OpenSSL.
 *
 * The peer is a thread of this test: an OpenSSL server with the run's
 * server certificate (tls_certs.h; hence a test under server/, though no
 * redis-server runs), on a loopback port, one thread a connection. It
 * answers PING and SCRIPT LOAD as a server would, and EVALSHA as the mode
 * says:
 *
 *   good       a whole decision (the store is usable: the fake works);
 *   garbage    "!garbage": SLUICE_EPROTO at once, with on_error=open or
 *              closed too (a bad reply is never taken for an outage);
 *   drip       a whole decision, a byte (one TLS record) every 150 ms, at
 *              timeout=200: SLUICE_ETIMEDOUT within the timeout and the
 *              margin of test_hostile.c, an outage (on_error=open admits);
 *   huge       "$2147483647" and then 'x' in 16 KB records every 2 ms, at
 *              max_reply_bytes=65536: SLUICE_EPROTO before the timeout, and
 *              the client's memory and what the peer could send stay
 *              bounded (never admitted);
 *   cut        half a reply, then the connection closed with no TLS
 *              close_notify (a server killed mid-reply): SLUICE_ECONN, an
 *              outage, as on plain TCP (on_error=open admits);
 *   stall      the handshake stalls: the peer reads the ClientHello and
 *              never answers: SLUICE_ETIMEDOUT after connect_timeout, not
 *              the longer command timeout; an outage.
 *
 * After each, the store is still usable: the next good reply is read.
 */
#include "fake_cluster.h" /* fc_script_sha() */
#include "server.h"       /* rs_mono_ms(), rs_sleep_ms() */
#include "stores.h"
#include "test.h"
#include "tls_certs.h"

#include <sluice.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define TIMEOUT_MS 200
/* How long past a timeout a call may take on a loaded machine (the margin
   of test_hostile.c). */
#define SLACK_MS 600
#define CONNECT_TIMEOUT_MS 300
#define DRIP_MS 150
#define HUGE_CHUNK 16384
#define HUGE_OFFERED (64u << 20) /* what the huge mode offers to send */
/* What the peer may get out before the client gives up on a huge reply:
   the 64 KB cap, the reader's 16 KB, and the loopback socket buffers. */
#define HUGE_SENT_MAX (16u << 20)
#define RSS_GROWTH_MAX (32ll << 20)

/* The fixed window's answer to a first hit of max 10 per minute. */
#define GOOD "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n"

typedef enum peer_mode { GOOD_MODE, GARBAGE, DRIP, HUGE, STALL, CUT } peer_mode;

/* ---- The hostile peer ------------------------------------------------------- */

static struct {
    SSL_CTX *ctx;
    int fd;
    int port;
    pthread_t thread;
    atomic_int mode;
    atomic_int stop;
    atomic_int live;           /* connection threads running */
    atomic_ullong huge_sent;   /* bytes of the last huge reply sent */
} peer;

/* Waits until 'fd' is readable, or the peer stops; false then. */
static bool wait_readable(int fd)
{
    while (!atomic_load(&peer.stop)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};

        if (poll(&p, 1, 50) > 0)
            return true;
    }
    return false;
}

/* Writes all of 'buf' on 'ssl'; false if the client has gone. */
static bool put(SSL *ssl, const char *buf, size_t len)
{
    while (len > 0) {
        int rc = SSL_write(ssl, buf, (int)len);

        if (rc <= 0)
            return false;
        buf += rc;
        len -= (size_t)rc;
    }
    return true;
}

/* The answer to EVALSHA in 'mode'; false once the client has gone. */
static bool answer_script(SSL *ssl, peer_mode mode)
{
    static char x[HUGE_CHUNK];
    unsigned long long sent = 0;

    switch (mode) {
    case GOOD_MODE:
        return put(ssl, GOOD, strlen(GOOD));
    case GARBAGE:
        return put(ssl, "!garbage\r\n", 10);
    case DRIP:
        for (const char *p = GOOD; *p != '\0'; p++) {
            if (!put(ssl, p, 1) || atomic_load(&peer.stop))
                return false;
            rs_sleep_ms(DRIP_MS);
        }
        return true;
    case HUGE:
        memset(x, 'x', sizeof(x));
        if (!put(ssl, "$2147483647\r\n", 13))
            return false;
        while (sent < HUGE_OFFERED && !atomic_load(&peer.stop)) {
            if (!put(ssl, x, sizeof(x)))
                break;
            sent += sizeof(x);
            atomic_store(&peer.huge_sent, sent);
            rs_sleep_ms(2);
        }
        return false;
    case CUT: /* half a reply, then the socket closed under TLS */
        (void)put(ssl, "*4\r\n:1\r\n", 8);
        shutdown(SSL_get_fd(ssl), SHUT_RDWR);
        return false;
    case STALL:
        break;
    }
    return false;
}

/* Answers the commands of one connection until the client goes. */
static void serve(SSL *ssl, int fd)
{
    redisReader *r = redisReaderCreate();
    char buf[16384];

    while (r != NULL) {
        redisReply *cmd = NULL;
        int got;

        if (redisReaderGetReply(r, (void **)&cmd) != REDIS_OK)
            break;
        if (cmd == NULL) {
            if (SSL_pending(ssl) == 0 && !wait_readable(fd))
                break;
            if ((got = SSL_read(ssl, buf, sizeof(buf))) <= 0)
                break;
            redisReaderFeed(r, buf, (size_t)got);
            continue;
        }
        if (cmd->type == REDIS_REPLY_ARRAY && cmd->elements >= 1 &&
            cmd->element[0]->type == REDIS_REPLY_STRING) {
            const char *name = cmd->element[0]->str;
            bool ok;

            if (strcasecmp(name, "PING") == 0) {
                ok = put(ssl, "+PONG\r\n", 7);
            } else if (strcasecmp(name, "SCRIPT") == 0 && cmd->elements == 3) {
                char reply[64];

                snprintf(reply, sizeof(reply), "$40\r\n%s\r\n",
                         fc_script_sha(cmd->element[2]->str,
                                       cmd->element[2]->len));
                ok = put(ssl, reply, strlen(reply));
            } else if (strcasecmp(name, "EVALSHA") == 0) {
                ok = answer_script(ssl, atomic_load(&peer.mode));
            } else {
                static const char unknown[] = "-ERR unknown command\r\n";

                ok = put(ssl, unknown, sizeof(unknown) - 1);
            }
            freeReplyObject(cmd);
            if (!ok)
                break;
        } else {
            freeReplyObject(cmd);
            break;
        }
    }
    redisReaderFree(r);
}

/* One connection: the handshake (or, in the stall mode, the ClientHello
   read and nothing sent), then its commands. */
static void *connection(void *arg)
{
    int fd = (int)(intptr_t)arg;
    SSL *ssl = NULL;

    if (atomic_load(&peer.mode) == STALL) {
        char hello[4096];

        while (wait_readable(fd) && recv(fd, hello, sizeof(hello), 0) > 0)
            ; /* read the ClientHello, answer nothing, until it closes */
    } else if ((ssl = SSL_new(peer.ctx)) != NULL && SSL_set_fd(ssl, fd) == 1 &&
               SSL_accept(ssl) == 1) {
        serve(ssl, fd);
    }
    SSL_free(ssl);
    ERR_clear_error();
    close(fd);
    atomic_fetch_sub(&peer.live, 1);
    return NULL;
}

static void *acceptor(void *arg)
{
    sigset_t pipe;
    int one = 1;

    (void)arg;
    /* A write to a client that has gone is EPIPE here, not SIGPIPE: the
       threads made below inherit the mask. The test's own thread keeps
       SIGPIPE, so a library that raised it would end the test. */
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    while (wait_readable(peer.fd)) {
        int fd = accept(peer.fd, NULL, NULL);
        pthread_t t;

        if (fd < 0)
            continue;
        /* Each answer goes out at once (no Nagle delay to blur the times). */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        atomic_fetch_add(&peer.live, 1);
        if (pthread_create(&t, NULL, connection, (void *)(intptr_t)fd) != 0) {
            close(fd);
            atomic_fetch_sub(&peer.live, 1);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

/* Starts the peer with the run's server certificate; -1 if it cannot. */
static int peer_start(const rs_certs *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((peer.ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
        SSL_CTX_use_certificate_chain_file(peer.ctx, c->server_cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(peer.ctx, c->server_key,
                                    SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return -1;
    }
    if ((peer.fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        bind(peer.fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(peer.fd, 16) < 0 ||
        getsockname(peer.fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    peer.port = ntohs(a.sin_port);
    return pthread_create(&peer.thread, NULL, acceptor, NULL) == 0 ? 0 : -1;
}

static void peer_stop(void)
{
    atomic_store(&peer.stop, 1);
    pthread_join(peer.thread, NULL);
    while (atomic_load(&peer.live) > 0)
        rs_sleep_ms(10);
    close(peer.fd);
    SSL_CTX_free(peer.ctx);
}

/* ---- The client ------------------------------------------------------------- */

static const sluice_limit limit = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

static sluice_store *open_store(uint64_t timeout_ms, const char *options)
{
    sluice_store *st = NULL;
    char url[1024];

    snprintf(url, sizeof(url),
             "rediss://127.0.0.1:%d?tls_ca=%s&timeout=%" PRIu64
             "&connect_timeout=%d%s%s",
             peer.port, rs_certs_get()->ca_cert, timeout_ms,
             CONNECT_TIMEOUT_MS, options[0] != '\0' ? "&" : "", options);
    if (!CHECK_OK(sluice_store_open(&st, url, NULL)))
        exit(2);
    return st;
}

/* After a bad reply, the store reads the next good one. */
static void check_recovers(sluice_store *st)
{
    sluice_decision d;
    uint64_t ms;

    atomic_store(&peer.mode, GOOD_MODE);
    CHECK_OK(test_hit_timed(&d, st, &limit, &ms));
    CHECK(d.allowed == 1 && d.remaining == 9 && d.reset_after_ms == 60000 &&
          d.fallback == SLUICE_ANSWERED);
}

/* The store's count of decisions a policy stood in for. */
static uint64_t stood_in(sluice_store *st)
{
    sluice_store_stats s;

    CHECK_OK(sluice_store_stats_get(&s, st));
    return s.fell_open + s.fell_closed;
}

/* The process's peak resident set so far, in bytes (it only grows, so
   what a call adds to it is what that call held at its most). */
static long long peak_rss_bytes(void)
{
    struct rusage u;

    if (getrusage(RUSAGE_SELF, &u) < 0)
        return -1;
    return (long long)u.ru_maxrss * 1024;
}

/* ---- The modes -------------------------------------------------------------- */

static const char *const policies[] = {"", "on_error=open", "on_error=closed"};

static const char *policy_name(size_t p)
{
    return policies[p][0] != '\0' ? policies[p] : "on_error=error";
}

static void test_good(void)
{
    sluice_store *st = open_store(TIMEOUT_MS, "");

    test_context("a good peer");
    check_recovers(st);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_garbage(void)
{
    for (size_t p = 0; p < 3; p++) {
        sluice_store *st = open_store(TIMEOUT_MS, policies[p]);
        sluice_decision d;
        uint64_t ms;

        test_context("garbage, %s", policy_name(p));
        check_recovers(st); /* connected, the script loaded */
        atomic_store(&peer.mode, GARBAGE);
        CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_EPROTO);
        CHECK(ms < TIMEOUT_MS); /* at once, not at the timeout */
        CHECK(strstr(sluice_last_error(), "not a reply") != NULL);
        printf("  garbage, %-16s EPROTO after %" PRIu64 " ms: %s\n",
               policy_name(p), ms, sluice_last_error());
        CHECK_EQ_U64(stood_in(st), 0); /* no policy stood in */
        check_recovers(st);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_drip(void)
{
    for (size_t p = 0; p < 2; p++) {
        sluice_store *st = open_store(TIMEOUT_MS, policies[p]);
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("a byte every %d ms, %s", DRIP_MS, policy_name(p));
        check_recovers(st);
        atomic_store(&peer.mode, DRIP);
        rc = test_hit_timed(&d, st, &limit, &ms);
        CHECK(ms >= TIMEOUT_MS - 5 && ms < TIMEOUT_MS + SLACK_MS);
        if (p == 0) {
            CHECK_RC(rc, SLUICE_ETIMEDOUT);
            CHECK(strstr(sluice_last_error(), "timed out") != NULL);
        } else { /* a timeout is an outage: on_error=open stands in */
            CHECK_OK(rc);
            CHECK(d.allowed == 1 && d.fallback == SLUICE_FELL_OPEN);
            CHECK_EQ_U64(stood_in(st), 1);
        }
        printf("  a byte every %d ms, %-16s %s after %" PRIu64
               " ms (timeout %d)\n", DRIP_MS, policy_name(p),
               rc == SLUICE_OK ? "admitted by policy" : "ETIMEDOUT", ms,
               TIMEOUT_MS);
        check_recovers(st);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_huge(void)
{
    for (size_t p = 0; p < 2; p++) {
        sluice_store *st = open_store(TIMEOUT_MS * 5, p == 0
                                          ? "max_reply_bytes=65536"
                                          : "max_reply_bytes=65536&"
                                            "on_error=open");
        long long rss0, rss1;
        unsigned long long sent;
        sluice_decision d;
        uint64_t ms, t0;

        test_context("$2147483647 then 16 KB every 2 ms, %s",
                     policy_name(p));
        check_recovers(st);
        atomic_store(&peer.huge_sent, 0);
        atomic_store(&peer.mode, HUGE);
        rss0 = peak_rss_bytes();
        CHECK_RC(test_hit_timed(&d, st, &limit, &ms), SLUICE_EPROTO);
        rss1 = peak_rss_bytes();
        CHECK(ms < TIMEOUT_MS * 5);
        CHECK(strstr(sluice_last_error(), "max_reply_bytes") != NULL);
        CHECK_EQ_U64(stood_in(st), 0); /* never admitted */
        CHECK(rss0 < 0 || rss1 - rss0 < RSS_GROWTH_MAX);
        /* The client closed the connection: the peer's writes fail soon
           after, having got out no more than the buffers hold. */
        atomic_store(&peer.mode, GOOD_MODE);
        t0 = rs_mono_ms();
        do {
            sent = atomic_load(&peer.huge_sent);
            rs_sleep_ms(50);
        } while (atomic_load(&peer.huge_sent) != sent &&
                 rs_mono_ms() - t0 < 5000);
        CHECK(sent < HUGE_SENT_MAX);
        printf("  huge length, %-16s EPROTO after %" PRIu64 " ms, peer got "
               "%llu KB of %u MB out, peak RSS +%lld KB: %s\n", policy_name(p), ms,
               sent >> 10, HUGE_OFFERED >> 20, (rss1 - rss0) >> 10,
               sluice_last_error());
        check_recovers(st);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_cut(void)
{
    for (size_t p = 0; p < 2; p++) {
        sluice_store *st = open_store(TIMEOUT_MS, policies[p]);
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("half a reply, then closed, %s", policy_name(p));
        check_recovers(st);
        atomic_store(&peer.mode, CUT);
        rc = test_hit_timed(&d, st, &limit, &ms);
        CHECK(ms < TIMEOUT_MS);
        if (p == 0) {
            CHECK_RC(rc, SLUICE_ECONN);
        } else { /* a lost connection is an outage */
            CHECK_OK(rc);
            CHECK(d.allowed == 1 && d.fallback == SLUICE_FELL_OPEN);
        }
        printf("  half a reply, closed, %-16s %s after %" PRIu64 " ms: %s\n",
               policy_name(p), rc == SLUICE_OK ? "admitted by policy"
                                               : sluice_strerror(rc),
               ms, rc == SLUICE_OK ? "-" : sluice_last_error());
        check_recovers(st);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_stall(void)
{
    for (size_t p = 0; p < 2; p++) {
        /* A command timeout well past connect_timeout: the handshake must
           end at the shorter one. */
        sluice_store *st = open_store(2000, policies[p]);
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("a handshake that stalls, %s", policy_name(p));
        atomic_store(&peer.mode, STALL);
        rc = test_hit_timed(&d, st, &limit, &ms);
        CHECK(ms >= CONNECT_TIMEOUT_MS - 5 &&
              ms < CONNECT_TIMEOUT_MS + SLACK_MS);
        if (p == 0) {
            CHECK_RC(rc, SLUICE_ETIMEDOUT);
            CHECK(strstr(sluice_last_error(), "handshake") != NULL);
        } else {
            CHECK_OK(rc);
            CHECK(d.allowed == 1 && d.fallback == SLUICE_FELL_OPEN);
        }
        printf("  stalled handshake, %-16s %s after %" PRIu64
               " ms (connect_timeout %d, timeout 2000)\n", policy_name(p),
               rc == SLUICE_OK ? "admitted by policy" : "ETIMEDOUT", ms,
               CONNECT_TIMEOUT_MS);
        check_recovers(st);
        sluice_store_free(st);
    }
    test_context(NULL);
}

int main(void)
{
    const rs_certs *c = rs_certs_get();
    uint64_t t0 = rs_mono_ms();

    if (c == NULL || peer_start(c) < 0) {
        fprintf(stderr, "test_tls_hostile: cannot start the TLS peer\n");
        return 2;
    }
    printf("test_tls_hostile: TLS peer on port %d\n", peer.port);
    test_good();
    test_garbage();
    test_drip();
    test_huge();
    test_cut();
    test_stall();
    peer_stop();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_tls_hostile");
}
