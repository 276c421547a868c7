/*
 * http_server.c - a small HTTP server on libevent's evhttp that limits each
 * client address with sluice's non-blocking API.
 *
 *   http_server [--store URL] [--limit MAX/WINDOW | --max N --window D]
 *               [--algo ALGO] [--name POLICY] [--bind ADDR] [--port PORT]
 *
 * Every request is one unit for its peer's address (the key). Admitted, it
 * answers 200; refused, 429 with Retry-After. Both carry the IETF RateLimit
 * and RateLimit-Policy fields (sluice_http_headers()), e.g. for --limit 5/1m:
 *
 *   RateLimit-Policy: "default";q=5;w=60
 *   RateLimit: "default";r=4;t=60
 *
 * A store that cannot answer is 503. The store is --store, else
 * $SLUICE_STORE, else the embedded one (mem://); the default limit is 5/1s,
 * the fixed window. It prints "listening on ADDR:PORT" once it is, and stops
 * on SIGINT or SIGTERM: freeing the handle answers what is pending (503).
 *
 * One loop, one thread, one handle (the rule of sluice/async.h), on the
 * libevent adapter (sluice/adapters/libevent.h): decisions leave while the
 * loop serves other connections, and the handle batches the calls started
 * in one loop iteration.
 */
#include <sluice.h>
#include <sluice/adapters/libevent.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct options {
    const char *store_url;
    const char *name;
    const char *bind;
    unsigned port;
    sluice_limit limit;
} options;

typedef struct app {
    options opts;
    sluice_store *store;
    sluice_async *async;
} app;

/* A request waiting for its decision: the callback's 'user'. */
typedef struct pending {
    app *ap;
    struct evhttp_request *req;
} pending;

/* ---- Options ------------------------------------------------------------- */

static int usage(const char *why)
{
    fprintf(stderr,
            "http_server: %s\n"
            "usage: http_server [--store URL] [--limit MAX/WINDOW | --max N "
            "--window D]\n"
            "                   [--algo ALGO] [--name POLICY] [--bind ADDR] "
            "[--port PORT]\n"
            "  --store URL   the store (default $SLUICE_STORE, else mem://)\n"
            "  --limit 5/1s  MAX units per WINDOW for each client address\n"
            "  --algo ALGO   the algorithm (default fixed-window)\n"
            "  --name NAME   the policy's name in the headers (default "
            "default)\n"
            "  --bind ADDR   the address to listen on (default 127.0.0.1)\n"
            "  --port PORT   the port (default 8080)\n",
            why);
    return 2;
}

static int parse_count(uint64_t *out, const char *text)
{
    char *end;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    *out = strtoull(text, &end, 10);
    return *end == '\0' ? 0 : -1;
}

/* "5/1s": MAX, a slash, a duration sluice_duration_parse() reads. */
static int parse_limit(sluice_limit *limit, const char *text)
{
    char max[32];
    const char *slash = strchr(text, '/');

    if (slash == NULL || (size_t)(slash - text) >= sizeof(max))
        return -1;
    memcpy(max, text, (size_t)(slash - text));
    max[slash - text] = '\0';
    if (parse_count(&limit->max, max) != 0)
        return -1;
    return sluice_duration_parse(&limit->window_ms, slash + 1) == SLUICE_OK
               ? 0 : -1;
}

/* One flag and its value; answers 0, or the exit status of a bad one. */
static int parse_flag(options *o, const char *flag, const char *v)
{
    uint64_t n;

    if (strcmp(flag, "--store") == 0)
        o->store_url = v;
    else if (strcmp(flag, "--name") == 0)
        o->name = v;
    else if (strcmp(flag, "--bind") == 0)
        o->bind = v;
    else if (strcmp(flag, "--limit") == 0) {
        if (parse_limit(&o->limit, v) != 0)
            return usage("--limit takes MAX/WINDOW, e.g. 5/1s");
    } else if (strcmp(flag, "--max") == 0) {
        if (parse_count(&o->limit.max, v) != 0)
            return usage("--max takes a number");
    } else if (strcmp(flag, "--window") == 0) {
        if (sluice_duration_parse(&o->limit.window_ms, v) != SLUICE_OK)
            return usage("--window takes a duration, e.g. 1s or 250ms");
    } else if (strcmp(flag, "--algo") == 0) {
        if (sluice_algo_parse(&o->limit.algo, v) != SLUICE_OK)
            return usage("--algo: unknown algorithm");
    } else if (strcmp(flag, "--port") == 0) {
        if (parse_count(&n, v) != 0 || n == 0 || n > 65535)
            return usage("--port takes 1..65535");
        o->port = (unsigned)n;
    } else
        return usage("unknown flag");
    return 0;
}

static int parse_options(options *o, int argc, char **argv)
{
    const char *env = getenv("SLUICE_STORE");
    int rc;

    o->store_url = env != NULL && env[0] != '\0' ? env : "mem://";
    o->name = "default";
    o->bind = "127.0.0.1";
    o->port = 8080;
    o->limit = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage("a flag without its value");
        if ((rc = parse_flag(o, argv[i], argv[i + 1])) != 0)
            return rc;
    }
    if (sluice_limit_check(&o->limit) != SLUICE_OK)
        return usage(sluice_last_error());
    return 0;
}

/* ---- Requests ------------------------------------------------------------ */

static void reply_text(struct evhttp_request *req, int code, const char *why,
                       const char *text)
{
    struct evbuffer *body = evbuffer_new();

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain");
    if (body != NULL)
        evbuffer_add_printf(body, "%s\n", text);
    evhttp_send_reply(req, code, why, body);
    if (body != NULL)
        evbuffer_free(body);
}

/*
 * The decision for one request: its header fields, then 200 or 429. An
 * error (the store's, or the handle freed with it pending) is 503. Replying
 * is safe even when the client has gone: evhttp then frees the request.
 */
static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    pending p = *(pending *)user;
    struct evhttp_request *req = p.req;
    app *ap = p.ap;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char rl[192], pol[192], ra[64];

    free(user);
    if (err != SLUICE_OK) {
        reply_text(req, 503, "Service Unavailable", sluice_last_error());
        return;
    }
    if (sluice_http_headers(d, &ap->opts.limit, ap->opts.name, rl,
                            sizeof(rl), pol, sizeof(pol), ra,
                            sizeof(ra)) != SLUICE_OK) {
        reply_text(req, 500, "Internal Server Error", sluice_last_error());
        return;
    }
    evhttp_add_header(h, "RateLimit-Policy", pol);
    evhttp_add_header(h, "RateLimit", rl);
    if (!d->allowed) {
        evhttp_add_header(h, "Retry-After", ra);
        reply_text(req, 429, "Too Many Requests", "too many requests");
    } else
        reply_text(req, 200, "OK", "ok");
}

/* Every request: one unit for its peer's address. */
static void on_request(struct evhttp_request *req, void *user)
{
    app *ap = user;
    char *addr = NULL;
    ev_uint16_t port = 0;
    pending *p;

    evhttp_connection_get_peer(evhttp_request_get_connection(req), &addr,
                               &port);
    if (addr == NULL) {
        reply_text(req, 500, "Internal Server Error", "no peer address");
        return;
    }
    if ((p = malloc(sizeof(*p))) == NULL) {
        reply_text(req, 503, "Service Unavailable", "out of memory");
        return;
    }
    p->ap = ap;
    p->req = req;
    /* No callback comes for a call that fails here: reply at once. */
    if (sluice_async_hit(ap->async, &ap->opts.limit, addr, strlen(addr), 1,
                         on_decision, p) != SLUICE_OK) {
        free(p);
        reply_text(req, 503, "Service Unavailable", sluice_last_error());
    }
}

/* ---- The server ---------------------------------------------------------- */

static void on_signal(evutil_socket_t sig, short what, void *user)
{
    event_base_loopbreak(user);
}

static int serve(app *ap, struct event_base *base)
{
    struct evhttp *http = evhttp_new(base);
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    int rc = 1;

    if (http == NULL || sigint == NULL || sigterm == NULL)
        fprintf(stderr, "http_server: out of memory\n");
    else if (evhttp_bind_socket(http, ap->opts.bind,
                                (ev_uint16_t)ap->opts.port) != 0)
        fprintf(stderr, "http_server: cannot listen on %s:%u\n",
                ap->opts.bind, ap->opts.port);
    else {
        evhttp_set_gencb(http, on_request, ap);
        event_add(sigint, NULL);
        event_add(sigterm, NULL);
        printf("listening on %s:%u\n", ap->opts.bind, ap->opts.port);
        fflush(stdout);
        event_base_dispatch(base);
        rc = 0;
    }
    /* Pending decisions are answered (503) while their requests live. */
    sluice_async_free(ap->async);
    ap->async = NULL;
    if (sigint != NULL)
        event_free(sigint);
    if (sigterm != NULL)
        event_free(sigterm);
    if (http != NULL)
        evhttp_free(http);
    return rc;
}

int main(int argc, char **argv)
{
    app ap;
    struct event_base *base;
    int rc;

    memset(&ap, 0, sizeof(ap));
    if ((rc = parse_options(&ap.opts, argc, argv)) != 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    if ((base = event_base_new()) == NULL) {
        fprintf(stderr, "http_server: event_base_new failed\n");
        return 1;
    }
    if (sluice_store_open(&ap.store, ap.opts.store_url, NULL) != SLUICE_OK) {
        fprintf(stderr, "http_server: %s: %s\n", ap.opts.store_url,
                sluice_last_error());
        event_base_free(base);
        return 1;
    }
    if (sluice_async_event_new(&ap.async, ap.store, base) != SLUICE_OK) {
        fprintf(stderr, "http_server: %s\n", sluice_last_error());
        rc = 1;
    } else
        rc = serve(&ap, base);
    sluice_store_free(ap.store);
    event_base_free(base);
    return rc;
}
