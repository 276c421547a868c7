/*
 * lossy_proxy.c - a proxy for the CLI tests (tests/cli/) that loses one
 * reply: the network failure after which a client cannot know whether its
 * call was applied.
 *
 *   sluice_lossy_proxy PORT UPSTREAM_PORT PATTERN
 *
 * Listens on 127.0.0.1:PORT until killed, and relays each connection to a
 * real server on 127.0.0.1:UPSTREAM_PORT, byte for byte, both ways. The
 * first connection whose client sends bytes holding PATTERN (say, a
 * script's argument "complete") is relayed on to the server as ever, so
 * the command is applied, but from then on nothing the server sends on it
 * reaches the client: the reply is lost, and the client times out. Every
 * other connection, later ones included, is relayed whole. It prints
 * "lost the replies of connection N" on stderr when it happens.
 */
#define _GNU_SOURCE /* memmem() */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PATTERN_MAX 256

static int upstream_port;
static const char *pattern;
static size_t pattern_len;
static atomic_bool struck; /* a connection has lost its replies */
static atomic_uint connections;

/* A connection to 127.0.0.1:'port', or -1. */
static int dial(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Writes all 'len' bytes of 'buf' to 'fd'; -1 when it cannot. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * True when the client's bytes, 'tail' (the last pattern_len - 1 bytes
 * seen before, '*tail_len' of them) then 'buf', hold the pattern; keeps
 * the new tail, so a pattern split between two reads is found.
 */
static bool holds_pattern(char *tail, size_t *tail_len, const char *buf,
                          size_t len)
{
    char joined[2 * PATTERN_MAX + 4096];
    size_t n = *tail_len, keep;
    bool found = false;

    for (size_t at = 0; at < len && !found; at += 4096) {
        size_t part = len - at < 4096 ? len - at : 4096;

        memcpy(joined + n, buf + at, part);
        n += part;
        found = memmem(joined, n, pattern, pattern_len) != NULL;
        keep = n < pattern_len - 1 ? n : pattern_len - 1;
        memmove(joined, joined + n - keep, keep);
        n = keep;
    }
    memcpy(tail, joined, n);
    *tail_len = n;
    return found;
}

/* Relays one connection, 'arg' its client's fd, until either side ends. */
static void *relay(void *arg)
{
    int client = (int)(intptr_t)arg, server = dial(upstream_port);
    unsigned id = atomic_fetch_add(&connections, 1) + 1;
    char buf[65536], tail[PATTERN_MAX];
    size_t tail_len = 0;
    bool muted = false;

    while (server >= 0) {
        struct pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
        ssize_t n;

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents != 0) {
            if ((n = read(client, buf, sizeof(buf))) <= 0 ||
                write_all(server, buf, (size_t)n) < 0)
                break;
            if (!muted &&
                holds_pattern(tail, &tail_len, buf, (size_t)n) &&
                !atomic_exchange(&struck, true)) {
                muted = true;
                fprintf(stderr, "lost the replies of connection %u\n", id);
            }
        }
        if (p[1].revents != 0) {
            if ((n = read(server, buf, sizeof(buf))) <= 0)
                break;
            if (!muted && write_all(client, buf, (size_t)n) < 0)
                break;
        }
    }
    if (server >= 0)
        close(server);
    close(client);
    return NULL;
}

int main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int one = 1, fd;
    long port, up;
    char *end1, *end2;

    if (argc != 4) {
        fprintf(stderr, "usage: sluice_lossy_proxy PORT UPSTREAM_PORT "
                        "PATTERN (PORT 0: any free one, printed)\n");
        return 2;
    }
    port = strtol(argv[1], &end1, 10);
    up = strtol(argv[2], &end2, 10);
    pattern = argv[3];
    pattern_len = strlen(pattern);
    if (*end1 != '\0' || *end2 != '\0' || port < 0 || port > 65535 ||
        up < 1 || up > 65535 || pattern_len == 0 ||
        pattern_len > PATTERN_MAX) {
        fprintf(stderr, "sluice_lossy_proxy: bad PORT, UPSTREAM_PORT or "
                        "PATTERN\n");
        return 2;
    }
    upstream_port = (int)up;
    a.sin_port = htons((uint16_t)port);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
                             sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
        fprintf(stderr, "sluice_lossy_proxy: cannot listen on port %ld: %s\n",
                port, strerror(errno));
        return 1;
    }
    /* PORT 0: the kernel's choice, told on the first line of stdout. */
    if (getsockname(fd, (struct sockaddr *)&a, &alen) == 0) {
        printf("port %d\n", ntohs(a.sin_port));
        fflush(stdout);
    }
    for (;;) {
        int c = accept(fd, NULL, NULL);
        pthread_t t;

        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return 1;
        }
        if (pthread_create(&t, NULL, relay, (void *)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(t);
    }
}
