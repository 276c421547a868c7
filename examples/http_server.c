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
 * One loop, one thread, one handle (the rule of sluice/async.h): decisions
 * leave while the loop serves other connections, and the handle batches
 * the calls started in one loop iteration.
 */
#include <sluice.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>


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

/* ---- The loop's hooks ---------------------------------------------------- */
/*
 * sluice/async.h's hooks over a libevent base: one event per descriptor the
 * handle watches, one timer. (sluice/adapters/libevent.h is this, for every
 * program; the example carries its own until that header lands.)
 */

typedef struct loop_fd {
    int fd;
    struct event *ev;
} loop_fd;

typedef struct loop {
    struct event_base *base;
    sluice_async *a;
    struct event *timer;
    loop_fd *fds;
    size_t n, cap;
} loop;

static void fd_ready(evutil_socket_t fd, short what, void *user)
{
    loop *l = user;
    int events = ((what & EV_READ) ? SLUICE_ASYNC_READ : 0) |
                 ((what & EV_WRITE) ? SLUICE_ASYNC_WRITE : 0);

    sluice_async_on_fd(l->a, (int)fd, events);
}

static void timer_fired(evutil_socket_t fd, short what, void *user)
{
    loop *l = user;

    sluice_async_on_timer(l->a);
}

static loop_fd *find_fd(loop *l, int fd)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->fds[i].fd == fd)
            return &l->fds[i];
    return NULL;
}

/* The hook has no way to fail: an event that cannot be made is reported
   and the descriptor left unwatched (its calls then time out). */
static void loop_watch(void *data, int fd, int events)
{
    loop *l = data;
    loop_fd *f = find_fd(l, fd);
    short what = (short)(EV_PERSIST |
                         ((events & SLUICE_ASYNC_READ) ? EV_READ : 0) |
                         ((events & SLUICE_ASYNC_WRITE) ? EV_WRITE : 0));

    if (f != NULL) {
        event_free(f->ev);
        *f = l->fds[--l->n];
    }
    if (events == 0)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        loop_fd *fds = realloc(l->fds, cap * sizeof(*fds));

        if (fds == NULL) {
            fprintf(stderr, "http_server: out of memory watching fd %d\n", fd);
            return;
        }
        l->fds = fds;
        l->cap = cap;
    }
    f = &l->fds[l->n];
    if ((f->ev = event_new(l->base, fd, what, fd_ready, l)) == NULL ||
        event_add(f->ev, NULL) != 0) {
        fprintf(stderr, "http_server: cannot watch fd %d\n", fd);
        if (f->ev != NULL)
            event_free(f->ev);
        return;
    }
    f->fd = fd;
    l->n++;
}

static void loop_timer(void *data, long long ms)
{
    loop *l = data;
    struct timeval tv;

    evtimer_del(l->timer);
    if (ms < 0)
        return;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(l->timer, &tv);
}

static void loop_cleanup(void *data)
{
    loop *l = data;

    for (size_t i = 0; i < l->n; i++)
        event_free(l->fds[i].ev);
    event_free(l->timer);
    free(l->fds);
    free(l);
}

/* A handle over 'store' whose descriptors and timer live in 'base'. */
static int loop_attach(sluice_async **out, sluice_store *store,
                       struct event_base *base)
{
    sluice_async_hooks hooks;
    loop *l = calloc(1, sizeof(*l));
    int rc;

    if (l == NULL || (l->timer = evtimer_new(base, timer_fired, l)) == NULL) {
        free(l);
        fprintf(stderr, "http_server: out of memory\n");
        return SLUICE_ENOMEM;
    }
    l->base = base;
    memset(&hooks, 0, sizeof(hooks));
    hooks.watch = loop_watch;
    hooks.timer = loop_timer;
    hooks.cleanup = loop_cleanup;
    hooks.loop_data = l;
    if ((rc = sluice_async_new(out, store, &hooks)) != SLUICE_OK) {
        loop_cleanup(l);
        return rc;
    }
    l->a = *out;
    return SLUICE_OK;
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
    if (loop_attach(&ap.async, ap.store, base) != SLUICE_OK) {
        fprintf(stderr, "http_server: %s\n", sluice_last_error());
        rc = 1;
    } else
        rc = serve(&ap, base);
    sluice_store_free(ap.store);
    event_base_free(base);
    return rc;
}
