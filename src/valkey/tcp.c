/*
 * tcp.c - the plain TCP transport, and what the socket transports share:
 * a connect by the call's deadline, and non-blocking reads and writes.
 *
 * The connect never blocks. A host that is an address (IPv4 or IPv6) is
 * not resolved; a name is resolved with getaddrinfo() on a thread of its
 * own, waited for by the deadline, so a resolver that does not answer
 * costs the call its deadline and no more. Each address is tried in turn with a
 * non-blocking connect(), waited for in poll(). The socket then has
 * TCP_NODELAY (a decision is one small write) and SO_KEEPALIVE.
 */
#include "valkey/valkey.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- Waiting ------------------------------------------------------------------------ */

int sluice__vk_fd_wait(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = sluice__monotonic_ms();
        uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc;

        if (left == 0)
            return 0;
        rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (rc > 0)
            return sluice__monotonic_ms() < deadline_ms;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return 1; /* the read or write that follows says what is wrong */
    }
}

int sluice__vk_timed_out(const sluice__vk_node *n, const char *doing,
                         uint64_t ms)
{
    return sluice__error(SLUICE_ETIMEDOUT, "valkey %s: %s: timed out (no "
                         "answer within %llu ms)", n->name, doing,
                         (unsigned long long)ms);
}

int sluice__vk_fd_wait_connected(int fd, const sluice__vk_node *n,
                                 uint64_t deadline_ms, uint64_t shown_ms)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    if (!sluice__vk_fd_wait(fd, POLLOUT, deadline_ms))
        return sluice__vk_timed_out(n, "connect", shown_ms);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr != 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(soerr));
    return SLUICE_OK;
}

/* ---- Connecting --------------------------------------------------------------------- */

/* One address: a non-blocking socket connected by the deadline, or -1
   and the error in '*err'. */
static int connect_one(const struct sockaddr *sa, socklen_t salen,
                       const sluice__vk_node *n, uint64_t deadline_ms,
                       uint64_t shown_ms, int *err)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    int one = 1;

    if (fd < 0) {
        *err = sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(errno));
        return -1;
    }
    if (connect(fd, sa, salen) < 0) {
        int rc = errno == EINPROGRESS
                     ? sluice__vk_fd_wait_connected(fd, n, deadline_ms,
                                                    shown_ms)
                     : sluice__error(SLUICE_ECONN, "valkey %s: connect: %s",
                                     n->name, strerror(errno));

        if (rc < 0) {
            *err = rc;
            close(fd);
            return -1;
        }
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    return fd;
}

/*
 * One resolution, shared by the caller and the thread that runs
 * getaddrinfo(): whichever of the two lets go of it last frees it, so a
 * caller that gave up at its deadline never waits for the resolver.
 */
typedef struct lookup {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    int refs;                 /* 2, then 1 when either lets go */
    bool done;
    int rc;                   /* getaddrinfo()'s */
    struct addrinfo *result;
    char port[8];
    int wake_fd;              /* the async dial's pipe; -1: none */
    char host[];
} lookup;

static void lookup_release(lookup *l)
{
    bool last;

    pthread_mutex_lock(&l->lock);
    last = --l->refs == 0;
    pthread_mutex_unlock(&l->lock);
    if (!last)
        return;
    if (l->result != NULL)
        freeaddrinfo(l->result);
    pthread_cond_destroy(&l->done_cond);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* getaddrinfo() of the lookup's host and port, into '*result'. */
static int lookup_do(const lookup *l, struct addrinfo **result)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};

    *result = NULL;
    return getaddrinfo(l->host, l->port, &hints, result);
}

static void *lookup_run(void *arg)
{
    lookup *l = arg;
    struct addrinfo *result;
    int rc = lookup_do(l, &result);

    pthread_mutex_lock(&l->lock);
    l->rc = rc;
    l->result = result;
    l->done = true;
    pthread_cond_signal(&l->done_cond);
    pthread_mutex_unlock(&l->lock);
    lookup_release(l);
    return NULL;
}

/*
 * Resolves the name 'n->host' by the deadline: getaddrinfo() on a thread
 * of its own (getaddrinfo() has no timeout), waited for until the
 * deadline, and left to finish by itself after it. '*out' is then the
 * caller's to freeaddrinfo().
 */
static int resolve(struct addrinfo **out, const sluice__vk_node *n,
                   uint64_t deadline_ms, uint64_t shown_ms)
{
    size_t len = strlen(n->host);
    lookup *l = calloc(1, sizeof(*l) + len + 1);
    pthread_attr_t attr;
    pthread_t t;
    int rc, err = SLUICE_OK;

    if (l == NULL)
        return sluice__error(SLUICE_ENOMEM, "valkey %s: resolve: out of "
                             "memory", n->name);
    memcpy(l->host, n->host, len + 1);
    snprintf(l->port, sizeof(l->port), "%d", n->port);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->done_cond, NULL);
    l->refs = 2;
    l->wake_fd = -1;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, lookup_run, l);
    pthread_attr_destroy(&attr);
    if (rc != 0) { /* no thread: resolve here, as getaddrinfo() would */
        l->rc = lookup_do(l, &l->result);
        l->done = true;
        l->refs = 1;
    }
    pthread_mutex_lock(&l->lock);
    while (!l->done) {
        struct timespec at;

        if (sluice__monotonic_ms() >= deadline_ms)
            break;
        sluice__realtime_at(&at, deadline_ms);
        (void)pthread_cond_timedwait(&l->done_cond, &l->lock, &at);
    }
    if (!l->done)
        err = sluice__vk_timed_out(n, "resolve", shown_ms);
    else if (l->rc != 0)
        err = sluice__error(SLUICE_ECONN, "valkey %s: resolve: %s", n->name,
                            gai_strerror(l->rc));
    else {
        *out = l->result;
        l->result = NULL;
    }
    pthread_mutex_unlock(&l->lock);
    lookup_release(l);
    return err;
}

int sluice__vk_tcp_connect(int *fd, const sluice__vk_node *n,
                           uint64_t deadline_ms, uint64_t shown_ms)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    struct addrinfo *list = NULL;
    int err = SLUICE_OK;

    *fd = -1;
    a4.sin_port = a6.sin6_port = htons((uint16_t)n->port);
    if (inet_pton(AF_INET, n->host, &a4.sin_addr) == 1)
        *fd = connect_one((struct sockaddr *)&a4, sizeof(a4), n, deadline_ms,
                          shown_ms, &err);
    else if (inet_pton(AF_INET6, n->host, &a6.sin6_addr) == 1)
        *fd = connect_one((struct sockaddr *)&a6, sizeof(a6), n, deadline_ms,
                          shown_ms, &err);
    else if ((err = resolve(&list, n, deadline_ms, shown_ms)) == 0)
        for (struct addrinfo *ai = list; ai != NULL && *fd < 0;
             ai = ai->ai_next)
            *fd = connect_one(ai->ai_addr, ai->ai_addrlen, n, deadline_ms,
                              shown_ms, &err);
    if (list != NULL)
        freeaddrinfo(list);
    return *fd >= 0 ? SLUICE_OK : err;
}

/* ---- Moving bytes ------------------------------------------------------------------- */

ssize_t sluice__vk_fd_read(sluice__vk_wire *w, const sluice__vk_node *n,
                           char *buf, size_t len, short *want)
{
    for (;;) {
        ssize_t got = recv(w->fd, buf, len, 0);

        if (got > 0)
            return got;
        if (got == 0)
            return sluice__error(SLUICE_ECONN, "valkey %s: read: the server "
                                 "closed the connection", n->name);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *want = POLLIN;
            return 0;
        }
        return sluice__error(SLUICE_ECONN, "valkey %s: read: %s", n->name,
                             strerror(errno));
    }
}

ssize_t sluice__vk_fd_write(sluice__vk_wire *w, const sluice__vk_node *n,
                            const char *buf, size_t len, short *want)
{
    for (;;) {
        ssize_t put = send(w->fd, buf, len, MSG_NOSIGNAL);

        if (put >= 0)
            return put;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *want = POLLOUT;
            return 0;
        }
        return sluice__error(SLUICE_ECONN, "valkey %s: write: %s", n->name,
                             strerror(errno));
    }
}

void sluice__vk_fd_close(sluice__vk_wire *w)
{
    sluice__vk_dial_free(w->dial);
    w->dial = NULL;
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}


/* ---- Connecting without waiting (the async API's) ------------------------------------ */

/*
 * A dial in progress: a name being resolved on its lookup thread, which
 * writes a byte to 'pipe' when done (so a loop can wait for it), then each
 * address tried in turn by a non-blocking connect.
 */
struct sluice__vk_dial {
    lookup *l;              /* while resolving; NULL after */
    int pipe[2];
    struct addrinfo *list, *next;
    struct sockaddr_storage one; /* a host that is an address */
    socklen_t one_len;
};

static void *lookup_run_piped(void *arg)
{
    lookup *l = arg;
    struct addrinfo *result;
    int rc = lookup_do(l, &result), fd;

    pthread_mutex_lock(&l->lock);
    l->rc = rc;
    l->result = result;
    l->done = true;
    fd = l->wake_fd;
    if (fd >= 0)
        (void)!write(fd, "x", 1);
    pthread_mutex_unlock(&l->lock);
    lookup_release(l);
    return NULL;
}

void sluice__vk_dial_free(sluice__vk_dial *d)
{
    if (d == NULL)
        return;
    if (d->l != NULL) {
        pthread_mutex_lock(&d->l->lock);
        d->l->wake_fd = -1; /* the thread must not write to a closed pipe */
        pthread_mutex_unlock(&d->l->lock);
        lookup_release(d->l);
    }
    if (d->pipe[0] >= 0)
        close(d->pipe[0]);
    if (d->pipe[1] >= 0)
        close(d->pipe[1]);
    if (d->list != NULL)
        freeaddrinfo(d->list);
    free(d);
}

/* A pipe whose ends are non-blocking and closed on exec. */
static int pipe_open(int fds[2])
{
    if (pipe(fds) < 0)
        return -1;
    for (int i = 0; i < 2; i++)
        if (fcntl(fds[i], F_SETFL, O_NONBLOCK) < 0 ||
            fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0) {
            close(fds[0]);
            close(fds[1]);
            fds[0] = fds[1] = -1;
            return -1;
        }
    return 0;
}

/* Starts the lookup thread of 'd' for the name of 'n'. */
static int dial_resolve(sluice__vk_dial *d, const sluice__vk_node *n)
{
    size_t len = strlen(n->host);
    lookup *l = calloc(1, sizeof(*l) + len + 1);
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    if (l == NULL || pipe_open(d->pipe) < 0) {
        free(l);
        return sluice__error(SLUICE_ENOMEM, "valkey %s: resolve: %s", n->name,
                             l == NULL ? "out of memory" : strerror(errno));
    }
    memcpy(l->host, n->host, len + 1);
    snprintf(l->port, sizeof(l->port), "%d", n->port);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->done_cond, NULL);
    l->refs = 2;
    l->wake_fd = d->pipe[1];
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, lookup_run_piped, l);
    pthread_attr_destroy(&attr);
    if (rc != 0) { /* no thread: resolve here, as getaddrinfo() would */
        l->rc = lookup_do(l, &l->result);
        l->done = true;
        l->refs = 1;
        (void)!write(d->pipe[1], "x", 1);
    }
    d->l = l;
    return SLUICE_OK;
}

/* Takes the lookup's answer, once its thread said it is done. */
static int dial_resolved(sluice__vk_dial *d, const sluice__vk_node *n)
{
    lookup *l = d->l;
    int err = SLUICE_OK;

    pthread_mutex_lock(&l->lock);
    if (!l->done) {
        pthread_mutex_unlock(&l->lock);
        return 1;
    }
    if (l->rc != 0)
        err = sluice__error(SLUICE_ECONN, "valkey %s: resolve: %s", n->name,
                            gai_strerror(l->rc));
    d->list = l->result;
    l->result = NULL;
    l->wake_fd = -1;
    pthread_mutex_unlock(&l->lock);
    lookup_release(l);
    d->l = NULL;
    d->next = d->list;
    return err;
}

/* Tries the next address of 'd' on 'w->fd': 0 connected, 1 in progress,
   or the error of the last address when none is left. */
static int dial_next(sluice__vk_dial *d, sluice__vk_wire *w,
                     const sluice__vk_node *n, int *err)
{
    while (d->next != NULL || d->one_len > 0) {
        const struct sockaddr *sa;
        socklen_t salen;
        int fd;

        if (d->one_len > 0) {
            sa = (const struct sockaddr *)&d->one;
            salen = d->one_len;
            d->one_len = 0;
        } else {
            sa = d->next->ai_addr;
            salen = d->next->ai_addrlen;
            d->next = d->next->ai_next;
        }
        fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
        if (fd < 0) {
            *err = sluice__error(SLUICE_ECONN, "valkey %s: connect: %s",
                                 n->name, strerror(errno));
            continue;
        }
        if (connect(fd, sa, salen) == 0 || errno == EINPROGRESS) {
            w->fd = fd;
            return errno == EINPROGRESS ? 1 : 0;
        }
        *err = sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(errno));
        close(fd);
    }
    return *err < 0 ? *err : sluice__error(SLUICE_ECONN, "valkey %s: connect: "
                                           "no address", n->name);
}

static void socket_tune(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

int sluice__vk_dial_start(sluice__vk_dial **out, sluice__vk_wire *w,
                          const sluice__vk_node *n, int *wait_fd, short *want)
{
    sluice__vk_dial *d = calloc(1, sizeof(*d));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&d->one;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&d->one;
    int err = SLUICE_OK, rc;

    *out = d;
    if (d == NULL)
        return sluice__error(SLUICE_ENOMEM, "valkey %s: connect: out of "
                             "memory", n->name);
    d->pipe[0] = d->pipe[1] = -1;
    if (inet_pton(AF_INET, n->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)n->port);
        d->one_len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, n->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)n->port);
        d->one_len = sizeof(*a6);
    } else {
        if ((err = dial_resolve(d, n)) < 0)
            return err;
        *wait_fd = d->pipe[0];
        *want = POLLIN;
        return 1;
    }
    if ((rc = dial_next(d, w, n, &err)) == 1) {
        *wait_fd = w->fd;
        *want = POLLOUT;
    } else if (rc == 0) {
        socket_tune(w->fd);
    }
    return rc;
}

int sluice__vk_dial_resume(sluice__vk_dial *d, sluice__vk_wire *w,
                           const sluice__vk_node *n, int *wait_fd, short *want)
{
    int err = SLUICE_OK, soerr = 0, rc;
    socklen_t len = sizeof(soerr);

    if (d->l != NULL) {
        if ((rc = dial_resolved(d, n)) != 0) {
            *wait_fd = d->pipe[0];
            *want = POLLIN;
            return rc;
        }
    } else if (w->fd >= 0) {
        if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            soerr = errno;
        if (soerr == 0) {
            socket_tune(w->fd);
            return SLUICE_OK;
        }
        err = sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                            strerror(soerr));
        close(w->fd);
        w->fd = -1;
    }
    if ((rc = dial_next(d, w, n, &err)) == 1) {
        *wait_fd = w->fd;
        *want = POLLOUT;
    } else if (rc == 0) {
        socket_tune(w->fd);
    }
    return rc;
}

static int tcp_start(sluice__vk_wire *w, const sluice__vk_node *n,
                     const struct sluice__vk_tls *tls, int *wait_fd,
                     short *want)
{
    (void)tls;
    return sluice__vk_dial_start(&w->dial, w, n, wait_fd, want);
}

static int tcp_resume(sluice__vk_wire *w, const sluice__vk_node *n,
                      int *wait_fd, short *want)
{
    return sluice__vk_dial_resume(w->dial, w, n, wait_fd, want);
}

/* ---- The transport ------------------------------------------------------------------ */

static int tcp_open(sluice__vk_wire *w, const sluice__vk_node *n,
                    const struct sluice__vk_tls *tls, uint64_t deadline_ms,
                    uint64_t shown_ms)
{
    (void)tls;
    return sluice__vk_tcp_connect(&w->fd, n, deadline_ms, shown_ms);
}

bool sluice__vk_fd_pending(const sluice__vk_wire *w)
{
    (void)w;
    return false; /* a socket keeps what it read in the kernel: poll sees */
}

const sluice__vk_transport sluice__vk_transport_tcp = {
    .name = "tcp",
    .open = tcp_open,
    .start = tcp_start,
    .resume = tcp_resume,
    .read = sluice__vk_fd_read,
    .write = sluice__vk_fd_write,
    .pending = sluice__vk_fd_pending,
    .close = sluice__vk_fd_close,
};
