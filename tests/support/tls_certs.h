/*
 * tls_certs.h - the certificates of a test run: made with the `openssl`
 * command-line tool in a fresh directory under $TMPDIR the first time a
 * process asks, kept for the rest of the process, and removed when it
 * exits (by the process that made them, never by a forked child).
 *
 *   const rs_certs *c = rs_certs_get();   NULL if openssl failed (why on
 *                                         stderr)
 *   rs_start_tls(&s, "yes", NULL);        a server with c->server_cert
 *   ... "?tls_ca=%s&tls_cert=%s&tls_key=%s", c->ca_cert, c->client_cert,
 *       c->client_key                    what a client needs
 *
 * Every key is EC P-256 (made at once, where RSA takes a while). What is
 * made, each a PEM file:
 *   ca_cert, ca_key         the CA: self-signed, CA:TRUE
 *   server_cert, server_key CN=localhost, SAN DNS:localhost and
 *                           IP:127.0.0.1, signed by the CA; no extended key
 *                           usage, so the cluster's nodes may present it as
 *                           clients too (tls-cluster, tls-replication)
 *   client_cert, client_key CN=sluice-test-client, clientAuth, signed by
 *                           the CA
 *   other_ca_cert           a second CA that signed nothing of ours: a
 *                           client trusting only it must refuse the server
 *   expired_cert, _key      like server_cert, signed by the CA, valid from
 *                           2020-01-01 to 2020-01-02 only (`openssl ca
 *                           -startdate -enddate`: `openssl x509 -req` in
 *                           OpenSSL 3.0 cannot date a certificate in the
 *                           past)
 *   wrong_name_cert, _key   signed by the CA, CN and SAN DNS:wrong.example
 *                           only: a hostname mismatch for 127.0.0.1 and
 *                           localhost alike
 * Valid certificates run for 3650 days from the moment they are made.
 */
#ifndef SLUICE_TEST_TLS_CERTS_H
#define SLUICE_TEST_TLS_CERTS_H

#define RS_CERT_PATH 300

typedef struct rs_certs {
    char dir[256];
    char ca_cert[RS_CERT_PATH], ca_key[RS_CERT_PATH];
    char server_cert[RS_CERT_PATH], server_key[RS_CERT_PATH];
    char client_cert[RS_CERT_PATH], client_key[RS_CERT_PATH];
    char other_ca_cert[RS_CERT_PATH], other_ca_key[RS_CERT_PATH];
    char expired_cert[RS_CERT_PATH], expired_key[RS_CERT_PATH];
    char wrong_name_cert[RS_CERT_PATH], wrong_name_key[RS_CERT_PATH];
} rs_certs;

/*
 * The run's certificates, made on the first call (a few tens of
 * milliseconds of openssl) and the same afterwards; NULL if they could not
 * be made, with openssl's output on stderr. Not thread-safe: call it from
 * the main thread first (rs_start_tls() does).
 */
const rs_certs *rs_certs_get(void);

#endif /* SLUICE_TEST_TLS_CERTS_H */
