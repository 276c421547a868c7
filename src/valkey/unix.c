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

static int unix_open(sluice__vk_wire *w, const sluice__vk_node *n,
                     const struct sluice__vk_tls *tls, uint64_t deadline_ms,
                     uint64_t shown_ms)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(n->host);
    int fd, err;

    (void)tls;
    if (len >= sizeof(a.sun_path))
        return sluice__error(SLUICE_EURL, "valkey %s: a Unix socket's path "
                             "holds at most %zu bytes", n->name,
                             sizeof(a.sun_path) - 1);
    memcpy(a.sun_path, n->host, len + 1);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     0)) < 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        /* A full backlog answers EAGAIN at once: an outage, as a refused
           TCP connect is. */
        err = errno == EINPROGRESS
                  ? sluice__vk_fd_wait_connected(fd, n, deadline_ms, shown_ms)
                  : sluice__error(SLUICE_ECONN, "valkey %s: connect: %s",
                                  n->name, strerror(errno));
        if (err < 0) {
            close(fd);
            return err;
        }
    }
    w->fd = fd;
    return SLUICE_OK;
}

/* The async API's connect: a Unix socket connects at once, or (rarely)
   in progress, waited for as a TCP connect is. */
static int unix_start(sluice__vk_wire *w, const sluice__vk_node *n,
                      const struct sluice__vk_tls *tls, int *wait_fd,
                      short *want)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(n->host);
    int fd;

    (void)tls;
    if (len >= sizeof(a.sun_path))
        return sluice__error(SLUICE_EURL, "valkey %s: a Unix socket's path "
                             "holds at most %zu bytes", n->name,
                             sizeof(a.sun_path) - 1);
    memcpy(a.sun_path, n->host, len + 1);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     0)) < 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                             strerror(errno));
    w->fd = fd;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
        return SLUICE_OK;
    if (errno == EINPROGRESS) {
        *wait_fd = fd;
        *want = POLLOUT;
        return 1;
    }
    return sluice__error(SLUICE_ECONN, "valkey %s: connect: %s", n->name,
                         strerror(errno));
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
