/*
 * unix.c - the Unix-socket transport: a server on this host, reached by
 * the path of its socket (unix:///path/to/socket, the node's 'host'). Its
 * bytes move as TCP's do (tcp.c); only the connect differs.
 */
#include "valkey/valkey.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A non-blocking socket whose connect to the path of 'n' began: 0 done,
   1 in progress (errno EINPROGRESS), or the error ('*fd' then -1 or the
   socket, for the caller to close). */
static int unix_dial(int *fd, const sluice__vk_node *n)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(n->host);

    *fd = -1;
    if (len >= sizeof(a.sun_path))
        return sluice__error(SLUICE_EURL, "valkey %s: a Unix socket's path "
                             "holds at most %zu bytes", n->name,
                             sizeof(a.sun_path) - 1);
    memcpy(a.sun_path, n->host, len + 1);
    if ((*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      0)) < 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(errno));
    if (connect(*fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return SLUICE_OK;
    if (errno == EINPROGRESS)
        return 1;
    /* A full backlog answers EAGAIN at once: an outage, as a refused TCP
       connect is. */
    return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                         strerror(errno));
}

static int unix_open(sluice__vk_wire *w, const sluice__vk_node *n,
                     const struct sluice__vk_tls *tls, uint64_t deadline_ms,
                     uint64_t shown_ms)
{
    int fd, err = unix_dial(&fd, n);

    (void)tls;
    if (err == 1)
        err = sluice__vk_fd_wait_connected(fd, n, deadline_ms, shown_ms);
    if (err < 0 && fd >= 0)
        close(fd);
    if (err < 0)
        return err;
    w->fd = fd;
    return SLUICE_OK;
}

/* The async API's connect: a Unix socket connects at once, or (rarely)
   in progress, waited for as a TCP connect is. */
static int unix_start(sluice__vk_wire *w, const sluice__vk_node *n,
                      const struct sluice__vk_tls *tls, int *wait_fd,
                      short *want)
{
    int rc = unix_dial(&w->fd, n);

    (void)tls;
    if (rc == 1) {
        *wait_fd = w->fd;
        *want = POLLOUT;
    }
    return rc; /* on an error, close() closes the socket */
}

static int unix_resume(sluice__vk_wire *w, const sluice__vk_node *n,
                       int *wait_fd, short *want)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    (void)wait_fd;
    (void)want;
    if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr != 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(soerr));
    return SLUICE_OK;
}

const sluice__vk_transport sluice__vk_transport_unix = {
    .name = "unix",
    .open = unix_open,
    .start = unix_start,
    .resume = unix_resume,
    .read = sluice__vk_fd_read,
    .write = sluice__vk_fd_write,
    .pending = sluice__vk_fd_pending,
    .close = sluice__vk_fd_close,
};
