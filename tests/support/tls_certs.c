/*
 * tls_certs.c - the run's certificates of tls_certs.h, made by the openssl
 * command-line tool (rs_run(), server.h) in a temporary directory that the
 * process removes when it exits.
 */
#include "tls_certs.h"
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OPENSSL_TIMEOUT_MS 20000
/* EC P-256 keys: openssl makes one at once. */
#define KEY_ARGS "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"

static rs_certs certs;
static int certs_made;  /* 1 made, -1 failed once (not tried again) */
static pid_t certs_owner;

/* ---- Files --------------------------------------------------------------- */

static void remove_certs(void)
{
    if (certs.dir[0] != '\0' && certs_owner == getpid())
        rs_remove_tree(certs.dir);
}

/* 'text' into the file DIR/'name'; 0 or -1. */
static int write_file(const char *name, const char *text)
{
    char path[RS_CERT_PATH];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", certs.dir, name);
    if ((f = fopen(path, "w")) == NULL) {
        fprintf(stderr, "tls_certs.c: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

/*
 * The configuration of `openssl req` (which needs a [req] section, and so
 * does not depend on the system's openssl.cnf) and of `openssl ca` (its
 * database in the directory, any subject with a CN), then the extensions
 * of each kind of leaf certificate.
 */
static int write_configs(void)
{
    char conf[2048];

    snprintf(conf, sizeof(conf),
             "[req]\ndistinguished_name = dn\n[dn]\n"
             "[ca]\ndefault_ca = test_ca\n"
             "[test_ca]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n"
             "serial = %s/serial\ndefault_md = sha256\npolicy = any\n"
             "unique_subject = no\ncopy_extensions = none\n"
             "[any]\ncommonName = supplied\n",
             certs.dir, certs.dir, certs.dir);
    if (write_file("openssl.cnf", conf) < 0 ||
        write_file("index.txt", "") < 0 || write_file("serial", "1000\n") < 0)
        return -1;
    return write_file("server.ext",
                      "basicConstraints = CA:FALSE\n"
                      "subjectAltName = DNS:localhost, IP:127.0.0.1\n") < 0 ||
                   write_file("client.ext",
                              "basicConstraints = CA:FALSE\n"
                              "extendedKeyUsage = clientAuth\n") < 0 ||
                   write_file("wrong.ext",
                              "basicConstraints = CA:FALSE\n"
                              "subjectAltName = DNS:wrong.example\n") < 0
               ? -1
               : 0;
}

/* ---- openssl ------------------------------------------------------------- */

/* Runs openssl with 'argv' (argv[0] "openssl"); 0, or -1 with its output. */
static int openssl(const char *const *argv)
{
    char out[4096];
    int rc = rs_run(argv, out, sizeof(out), OPENSSL_TIMEOUT_MS);

    if (rc != 0) {
        fprintf(stderr, "tls_certs.c: openssl %s failed (%d):\n%s\n",
                argv[1], rc, out);
        return -1;
    }
    return 0;
}

/* A self-signed CA, DIR/'name'.crt and .key, with subject 'subj'. */
static int make_ca(const char *name, const char *subj, char *cert, char *key)
{
    char conf[RS_CERT_PATH];

    snprintf(conf, sizeof(conf), "%s/openssl.cnf", certs.dir);
    snprintf(cert, RS_CERT_PATH, "%s/%s.crt", certs.dir, name);
    snprintf(key, RS_CERT_PATH, "%s/%s.key", certs.dir, name);
    const char *argv[] = {"openssl", "req", "-x509", "-new", KEY_ARGS,
                          "-nodes", "-config", conf, "-keyout", key,
                          "-out", cert, "-days", "3650", "-subj", subj,
                          "-addext", "basicConstraints=critical,CA:TRUE",
                          "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                          "-addext", "subjectKeyIdentifier=hash", NULL};
    return openssl(argv);
}

/*
 * A key and a certificate signed by the CA, DIR/'name'.crt and .key, with
 * subject 'subj' and the extensions of DIR/'ext'; valid for 3650 days from
 * now, or from 'start' to 'end' (openssl's YYYYMMDDHHMMSSZ) when given.
 */
static int make_leaf(const char *name, const char *subj, const char *ext,
                     const char *start, const char *end, char *cert,
                     char *key)
{
    char conf[RS_CERT_PATH], csr[RS_CERT_PATH], extfile[RS_CERT_PATH];

    snprintf(conf, sizeof(conf), "%s/openssl.cnf", certs.dir);
    snprintf(csr, sizeof(csr), "%s/%s.csr", certs.dir, name);
    snprintf(extfile, sizeof(extfile), "%s/%s", certs.dir, ext);
    snprintf(cert, RS_CERT_PATH, "%s/%s.crt", certs.dir, name);
    snprintf(key, RS_CERT_PATH, "%s/%s.key", certs.dir, name);
    const char *req[] = {"openssl", "req", "-new", KEY_ARGS, "-nodes",
                         "-config", conf, "-keyout", key, "-out", csr,
                         "-subj", subj, NULL};
    const char *sign[] = {"openssl", "ca", "-batch", "-notext", "-config",
                          conf, "-cert", certs.ca_cert, "-keyfile",
                          certs.ca_key, "-in", csr, "-out", cert,
                          "-extfile", extfile,
                          start != NULL ? "-startdate" : "-days",
                          start != NULL ? start : "3650",
                          start != NULL ? "-enddate" : NULL, end, NULL};
    return openssl(req) < 0 || openssl(sign) < 0 ? -1 : 0;
}

/* ---- The run's certificates ---------------------------------------------- */

/* Makes everything of tls_certs.h in a fresh directory; 0 or -1. */
static int make_all(void)
{
    const char *tmp = getenv("TMPDIR");
    rs_certs *c = &certs;

    snprintf(c->dir, sizeof(c->dir), "%s/sluice-certs-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(c->dir) == NULL) {
        fprintf(stderr, "tls_certs.c: mkdtemp %s: %s\n", c->dir,
                strerror(errno));
        c->dir[0] = '\0';
        return -1;
    }
    certs_owner = getpid();
    atexit(remove_certs);
    if (write_configs() < 0 ||
        make_ca("ca", "/CN=sluice test CA", c->ca_cert, c->ca_key) < 0 ||
        make_ca("other-ca", "/CN=sluice unrelated CA", c->other_ca_cert,
                c->other_ca_key) < 0 ||
        make_leaf("server", "/CN=localhost", "server.ext", NULL, NULL,
                  c->server_cert, c->server_key) < 0 ||
        make_leaf("client", "/CN=sluice-test-client", "client.ext", NULL,
                  NULL, c->client_cert, c->client_key) < 0 ||
        make_leaf("expired", "/CN=localhost", "server.ext", "20200101000000Z",
                  "20200102000000Z", c->expired_cert, c->expired_key) < 0 ||
        make_leaf("wrong-name", "/CN=wrong.example", "wrong.ext", NULL, NULL,
                  c->wrong_name_cert, c->wrong_name_key) < 0)
        return -1;
    return 0;
}

/*
 * The run's certificates, made on the first call and the same afterwards;
 * NULL if they could not be made (openssl's output on stderr).
 */
const rs_certs *rs_certs_get(void)
{
    if (certs_made == 0)
        certs_made = make_all() == 0 ? 1 : -1;
    return certs_made == 1 ? &certs : NULL;
}
