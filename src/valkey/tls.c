/*
 * tls.c - the TLS transport (valkeys://, rediss://, and their +cluster and
 * +sentinel forms), with OpenSSL.
 *
 * A store keeps one SSL_CTX (sluice__vk_tls), made at open from its settings:
 * the CA (a file, a directory, or the system's store), a client certificate and
 * key for mutual TLS, TLS 1.2 at the least. Each connection is a TCP
 * connect (tcp.c) and then the handshake, both by the call's deadline: the
 * socket stays non-blocking, and SSL_ERROR_WANT_READ/WANT_WRITE become a
 * wait in poll() for what OpenSSL asked. The peer's certificate is
 * verified against the CA and the expected name (SNI too): the host of the
 * URL, or 'tls_server_name'; an address is checked as an address. With
 * 'tls_insecure' nothing is verified (the docs warn of it).
 *
 * What failed decides the error. A certificate that does not verify, a
 * name that does not match, a handshake the peer refused or an alert it
 * sent (a client certificate it wanted, say): SLUICE_EAUTH, always an
 * error, never taken for an outage, with OpenSSL's reason in the message.
 * A connection that closes or breaks (also with no close_notify, after the
 * handshake): SLUICE_ECONN. A record that does not decrypt after the
 * handshake: SLUICE_EPROTO.
 *
 * OpenSSL's error queue is per thread: it is cleared before each call, so
 * a reason read after a failure is that call's.
 */
#include "valkey/valkey.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct sluice__vk_tls {
    SSL_CTX *ctx;
    char *server_name; /* NULL: each node's host */
    bool insecure;
};

static void tls_close(sluice__vk_wire *w);

/* ---- The socket under TLS ----------------------------------------------------------- */

/*
 * OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a
 * socket the peer closed and kills a program that does not ignore it. This
 * one is the socket BIO with its write made send(MSG_NOSIGNAL), as tcp.c
 * writes: made once per process.
 */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
    int fd = -1;
    ssize_t put;

    BIO_get_fd(b, &fd);
    put = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (put <= 0 && BIO_sock_should_retry((int)put))
        BIO_set_retry_write(b);
    return (int)put;
}

static void nosig_make(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                                     BIO_TYPE_DESCRIPTOR,
                                 "sluice socket");

    if (m == NULL)
        return;
    BIO_meth_set_write(m, nosig_write);
    BIO_meth_set_read(m, BIO_meth_get_read(sock));
    BIO_meth_set_puts(m, BIO_meth_get_puts(sock));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock));
    BIO_meth_set_create(m, BIO_meth_get_create(sock));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock));
    nosig_method = m;
}

/* Gives 'ssl' the socket 'fd' through the BIO above; false without memory. */
static bool ssl_take_fd(SSL *ssl, int fd)
{
    BIO *b;

    pthread_once(&nosig_once, nosig_make);
    if (nosig_method == NULL || (b = BIO_new(nosig_method)) == NULL)
        return false;
    BIO_set_fd(b, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, b, b);
    return true;
}

/* ---- The store's context ------------------------------------------------------------ */

/* OpenSSL's last reason on this thread, for a message. */
static const char *ssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();

    if (e == 0)
        return "no reason given";
    ERR_error_string_n(e, buf, cap);
    return buf;
}

int sluice__vk_tls_new(struct sluice__vk_tls **out,
                       const sluice__vk_tls_opts *o)
{
    struct sluice__vk_tls *t = calloc(1, sizeof(*t));
    char why[256];
    int err = SLUICE_OK;

    *out = NULL;
    if (t == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for TLS");
    ERR_clear_error();
    if ((t->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "TLS: cannot make a context: %s",
                            ssl_reason(why, sizeof(why)));
        goto fail;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Read what the socket holds in one read(), not a record's header and
       then its body: half the reads a reply. What it read ahead is
       pending (tls_pending(): SSL_has_pending()). */
    SSL_CTX_set_read_ahead(t->ctx, 1);
    t->insecure = o->insecure;
    SSL_CTX_set_verify(t->ctx, o->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       NULL);
    if (o->ca_file != NULL || o->ca_dir != NULL) {
        if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file, o->ca_dir) != 1) {
            err = sluice__error(SLUICE_ECONFIG, "TLS: cannot load the CA %s "
                                "'%s': %s", o->ca_file ? "file" : "directory",
                                o->ca_file ? o->ca_file : o->ca_dir,
                                ssl_reason(why, sizeof(why)));
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        err = sluice__error(SLUICE_ECONFIG, "TLS: cannot load the system's "
                            "CA store: %s", ssl_reason(why, sizeof(why)));
        goto fail;
    }
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        err = sluice__error(SLUICE_ECONFIG, "TLS: a client certificate needs "
                            "its key, and a key its certificate (tls_cert "
                            "and tls_key)");
        goto fail;
    }
    if (o->cert_file != NULL &&
        (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1 ||
         SSL_CTX_use_PrivateKey_file(t->ctx, o->key_file,
                                     SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(t->ctx) != 1)) {
        err = sluice__error(SLUICE_ECONFIG, "TLS: cannot use the client "
                            "certificate '%s' with the key '%s': %s",
                            o->cert_file, o->key_file,
                            ssl_reason(why, sizeof(why)));
        goto fail;
    }
    if (o->server_name != NULL &&
        (t->server_name = strdup(o->server_name)) == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "no memory for TLS");
        goto fail;
    }
    *out = t;
    return SLUICE_OK;
fail:
    sluice__vk_tls_free(t);
    return err;
}

void sluice__vk_tls_free(struct sluice__vk_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t->server_name);
    free(t);
}

/* ---- Errors ------------------------------------------------------------------------- */

/* Whether OpenSSL's reason 'last' is an alert the peer sent, or (OpenSSL
   3) a connection it closed with no close_notify. */
static bool peer_alert(unsigned long last)
{
    return ERR_GET_REASON(last) >= SSL_AD_REASON_OFFSET;
}

static bool eof_unnotified(unsigned long last)
{
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
    return ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
#else
    (void)last;
    return false;
#endif
}

/* The error of a handshake that failed for a TLS reason: the certificate,
   its name ('expected'), or the peer's refusal; always SLUICE_EAUTH. */
static int handshake_error(SSL *ssl, const sluice__vk_node *n,
                           const char *expected, unsigned long last)
{
    long v = SSL_get_verify_result(ssl);
    char why[256];

    if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
        return sluice__error(SLUICE_EAUTH, "valkey %s: TLS: hostname "
                             "mismatch: the server's certificate is not for "
                             "'%s' (tls_server_name names another)", n->name,
                             expected);
    if (v != X509_V_OK)
        return sluice__error(SLUICE_EAUTH, "valkey %s: TLS: certificate "
                             "verify failed: %s", n->name,
                             X509_verify_cert_error_string(v));
    return sluice__error(SLUICE_EAUTH, "valkey %s: TLS handshake failed: %s%s",
                         n->name, ssl_reason(why, sizeof(why)),
                         ERR_GET_REASON(last) == SSL_R_WRONG_VERSION_NUMBER
                             ? " (is that port TLS?)" : "");
}

/*
 * The error of a failed SSL call on 'ssl' (its result 'rc'), 'doing' what
 * it was; 0 with '*want' set when it only has to wait. In the handshake
 * ('expected': the name the certificate must have; NULL after it) a TLS
 * failure is SLUICE_EAUTH (the peer refused us, or we it). After it, a
 * connection that ends before its first reply byte ('fresh') is too: a
 * server that wants a client certificate we did not send finds out after
 * the handshake (TLS 1.3) and ends the connection, its alert often lost to
 * the reset. Later, an alert from the peer is SLUICE_EAUTH, a connection
 * closed (with or without close_notify) SLUICE_ECONN, as on plain TCP, and
 * a record that fails SLUICE_EPROTO.
 */
static int ssl_fail(SSL *ssl, int rc, const sluice__vk_node *n,
                    const char *doing, const char *expected, bool fresh,
                    short *want)
{
    int e = SSL_get_error(ssl, rc);
    unsigned long last = ERR_peek_last_error();
    bool closed = e == SSL_ERROR_ZERO_RETURN ||
                  (e == SSL_ERROR_SYSCALL && last == 0) ||
                  (e == SSL_ERROR_SSL && eof_unnotified(last));
    char why[256];

    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    if (expected != NULL && !closed)
        return handshake_error(ssl, n, expected, last);
    if (fresh && expected == NULL && (closed || peer_alert(last)))
        return sluice__error(SLUICE_EAUTH, "valkey %s: %s: the server ended "
                             "TLS before its first reply (%s): does it want "
                             "a client certificate (tls_cert, tls_key)?",
                             n->name, doing,
                             e == SSL_ERROR_SSL ? ssl_reason(why, sizeof(why))
                             : errno != 0 ? strerror(errno)
                                          : "the connection closed");
    if (closed)
        return sluice__error(SLUICE_ECONN, "valkey %s: %s: the server closed "
                             "the connection (%s)", n->name, doing,
                             e == SSL_ERROR_ZERO_RETURN ? "TLS close_notify"
                             : errno != 0 ? strerror(errno)
                                          : "no TLS close_notify");
    if (peer_alert(last))
        return sluice__error(SLUICE_EAUTH, "valkey %s: %s: the server ended "
                             "TLS with an alert: %s", n->name, doing,
                             ssl_reason(why, sizeof(why)));
    return sluice__error(SLUICE_EPROTO, "valkey %s: %s: TLS: %s", n->name,
                         doing, ssl_reason(why, sizeof(why)));
}

/* ---- The transport ------------------------------------------------------------------ */

/* Whether 's' is an IPv4 or IPv6 address (checked as one, never sent as
   SNI). */
static bool is_address(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* The SSL of 'w' over its connected socket, set to check the server's
   name (or address) unless 'insecure'. */
static int tls_setup(sluice__vk_wire *w, const sluice__vk_node *n,
                     const struct sluice__vk_tls *tls)
{
    const char *name = tls->server_name ? tls->server_name : n->host;
    X509_VERIFY_PARAM *param;
    SSL *ssl;

    ERR_clear_error();
    if ((ssl = SSL_new(tls->ctx)) == NULL || !ssl_take_fd(ssl, w->fd)) {
        SSL_free(ssl);
        sluice__vk_fd_close(w);
        return sluice__error(SLUICE_ENOMEM, "valkey %s: TLS: no memory for "
                             "a connection", n->name);
    }
    w->ssl = ssl;
    w->tls = tls;
    param = SSL_get0_param(ssl);
    if (!is_address(name))
        SSL_set_tlsext_host_name(ssl, name);
    if (!tls->insecure) {
        X509_VERIFY_PARAM_set_hostflags(param,
                                        X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (!(is_address(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name)
                               : X509_VERIFY_PARAM_set1_host(param, name, 0))) {
            tls_close(w);
            return sluice__error(SLUICE_ECONFIG, "valkey %s: TLS: cannot "
                                 "check for the name '%s'", n->name, name);
        }
    }
    SSL_set_connect_state(ssl);
    return SLUICE_OK;
}

/* One step of the handshake: 0 done, 1 to go on once the socket is ready
   for '*want', or the error (the connection then closed). */
static int handshake_step(sluice__vk_wire *w, const sluice__vk_node *n,
                          short *want)
{
    const struct sluice__vk_tls *tls = w->tls;
    const char *name = tls->server_name ? tls->server_name : n->host;
    int rc, err;

    ERR_clear_error();
    errno = 0;
    if ((rc = SSL_do_handshake(w->ssl)) == 1) {
        w->fresh = true;
        return SLUICE_OK;
    }
    *want = 0;
    if ((err = ssl_fail(w->ssl, rc, n, "TLS handshake", name, false, want)) <
        0) {
        tls_close(w);
        return err;
    }
    return 1;
}

static int tls_open(sluice__vk_wire *w, const sluice__vk_node *n,
                    const struct sluice__vk_tls *tls, uint64_t deadline_ms,
                    uint64_t shown_ms)
{
    int err;

    if ((err = sluice__vk_tcp_connect(&w->fd, n, deadline_ms, shown_ms)) < 0 ||
        (err = tls_setup(w, n, tls)) < 0)
        return err;
    for (;;) {
        short want = 0;

        if ((err = handshake_step(w, n, &want)) <= 0)
            return err;
        if (!sluice__vk_fd_wait(w->fd, want, deadline_ms)) {
            tls_close(w);
            return sluice__vk_timed_out(n, "TLS handshake", shown_ms);
        }
    }
}

/* The async API's connect: the TCP dial, then the handshake, each step
   returning at once. */
static int tls_step(sluice__vk_wire *w, const sluice__vk_node *n, int rc,
                    int *wait_fd, short *want)
{
    int err;

    if (rc != 0)
        return rc; /* still dialling, or failed */
    if (w->ssl == NULL && (err = tls_setup(w, n, w->tls)) < 0)
        return err;
    *wait_fd = w->fd;
    return handshake_step(w, n, want);
}

static int tls_start(sluice__vk_wire *w, const sluice__vk_node *n,
                     const struct sluice__vk_tls *tls, int *wait_fd,
                     short *want)
{
    w->tls = tls;
    return tls_step(w, n, sluice__vk_dial_start(&w->dial, w, n, wait_fd, want),
                    wait_fd, want);
}

static int tls_resume(sluice__vk_wire *w, const sluice__vk_node *n,
                      int *wait_fd, short *want)
{
    if (w->ssl != NULL) {
        *wait_fd = w->fd;
        return handshake_step(w, n, want);
    }
    return tls_step(w, n, sluice__vk_dial_resume(w->dial, w, n, wait_fd, want),
                    wait_fd, want);
}

static ssize_t tls_read(sluice__vk_wire *w, const sluice__vk_node *n, char *buf,
                        size_t len, short *want)
{
    int rc, cap = len > INT32_MAX ? INT32_MAX : (int)len;

    ERR_clear_error();
    errno = 0;
    if ((rc = SSL_read(w->ssl, buf, cap)) > 0) {
        w->fresh = false;
        return rc;
    }
    return ssl_fail(w->ssl, rc, n, "read", NULL, w->fresh, want);
}

static ssize_t tls_write(sluice__vk_wire *w, const sluice__vk_node *n,
                         const char *buf, size_t len, short *want)
{
    int rc, cap = len > INT32_MAX ? INT32_MAX : (int)len;

    ERR_clear_error();
    errno = 0;
    if ((rc = SSL_write(w->ssl, buf, cap)) > 0)
        return rc;
    return ssl_fail(w->ssl, rc, n, "write", NULL, w->fresh, want);
}

static bool tls_pending(const sluice__vk_wire *w)
{
    return w->ssl != NULL && SSL_has_pending(w->ssl);
}

/* Frees the connection's TLS and closes its socket; no close_notify is
   waited for (the socket is non-blocking: one try, then gone). */
static void tls_close(sluice__vk_wire *w)
{
    if (w->ssl != NULL) {
        ERR_clear_error();
        (void)SSL_shutdown(w->ssl);
        SSL_free(w->ssl);
        ERR_clear_error();
        w->ssl = NULL;
    }
    sluice__vk_fd_close(w);
}

const sluice__vk_transport sluice__vk_transport_tls = {
    .name = "tls",
    .open = tls_open,
    .start = tls_start,
    .resume = tls_resume,
    .read = tls_read,
    .write = tls_write,
    .pending = tls_pending,
    .close = tls_close,
};
