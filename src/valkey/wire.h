/*
 * wire.h - a connection's bytes, from valkey.h: the transports (tcp.c,
 * unix.c, tls.c) and wire.c, which waits by a deadline (the blocking path)
 * or not at all (the async API's steps).
 */
#ifndef SLUICE_VALKEY_WIRE_H
#define SLUICE_VALKEY_WIRE_H

#include "core/core.h"

#include <hiredis/hiredis.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- A connection's bytes (wire.c) -------------------------------------------- */

/* What one reply read on a connection may hold, and holds so far; the
   connection's reader counts into it. */
typedef struct sluice__vk_caps {
    uint64_t max_bytes, max_elements;
    uint64_t bytes, elements;
    bool over;                 /* a cap was passed */
    const char *bad;           /* what hiredis would have taken wrongly */
    const struct redisReader *reader;
} sluice__vk_caps;

struct sluice__vk_node;
struct sluice__vk_tls;
/* A TCP connect in progress without waiting (tcp.c): a name resolved on a
   thread of its own, then each address tried. */
typedef struct sluice__vk_dial sluice__vk_dial;

/*
 * A connection's bytes: the transport that moves them (tcp.c, unix.c,
 * tls.c), the socket, what is formatted and not yet written, and hiredis'
 * reader, which parses what was read. hiredis 0.14 has no transports of
 * its own (nor TLS), so its context is not used: only its reader and its
 * command formatting.
 */
typedef struct sluice__vk_wire {
    const struct sluice__vk_transport *t;
    int fd;
    void *ssl;            /* the TLS transport's SSL; NULL for the others */
    bool fresh;           /* TLS: no reply byte read since the handshake */
    sluice__vk_dial *dial; /* a connect without waiting, in progress */
    const struct sluice__vk_tls *tls; /* the TLS transport's settings */
    redisReader *reader;
    char *obuf;           /* formatted commands, [opos, olen) not written */
    size_t olen, opos, ocap;
} sluice__vk_wire;

/*
 * A transport: how a node is reached and its bytes moved, each in one file.
 * Every function returns at once (the socket is non-blocking); the waits
 * are wire.c's, in poll(), by the call's deadline.
 */
typedef struct sluice__vk_transport {
    const char *name; /* "tcp", "unix", "tls": for messages */
    /* Connects 'w' to 'n' by 'deadline_ms' (monotonic), the TLS handshake
       included; 'shown_ms' is the time a message says was allowed. Sets
       w->fd (non-blocking) and, for TLS, w->ssl. */
    int (*open)(sluice__vk_wire *w, const struct sluice__vk_node *n,
                const struct sluice__vk_tls *tls, uint64_t deadline_ms,
                uint64_t shown_ms);
    /* Starts connecting 'w' to 'n' without waiting: 0 connected (the TLS
       handshake done too); 1 in progress: wait until '*wait_fd' is ready
       for '*want' (POLLIN or POLLOUT), then call resume(); or a negative
       SLUICE_E*. '*wait_fd' is w->fd, or while a host name is resolved, a
       descriptor the resolver makes readable when done. close() frees a
       connect abandoned half-way. */
    int (*start)(sluice__vk_wire *w, const struct sluice__vk_node *n,
                 const struct sluice__vk_tls *tls, int *wait_fd, short *want);
    int (*resume)(sluice__vk_wire *w, const struct sluice__vk_node *n,
                  int *wait_fd, short *want);
    /* Moves up to 'len' bytes: how many (> 0); 0 when none can move now,
       '*want' then POLLIN or POLLOUT, what to wait for; or a negative
       SLUICE_E* (set with its message naming 'n'). */
    ssize_t (*read)(sluice__vk_wire *w, const struct sluice__vk_node *n,
                    char *buf, size_t len, short *want);
    ssize_t (*write)(sluice__vk_wire *w, const struct sluice__vk_node *n,
                     const char *buf, size_t len, short *want);
    /* Whether it holds bytes already taken from the socket and not yet
       read (TLS: a record decrypted in part): poll() would not see them. */
    bool (*pending)(const sluice__vk_wire *w);
    /* Closes the socket and frees what the transport keeps. */
    void (*close)(sluice__vk_wire *w);
} sluice__vk_transport;

extern const sluice__vk_transport sluice__vk_transport_tcp;
extern const sluice__vk_transport sluice__vk_transport_unix;
extern const sluice__vk_transport sluice__vk_transport_tls;

/* Plain sockets (tcp.c): connect to 'n' (a TCP host and port) by the
   deadline, and the reads and writes that TCP and Unix sockets share. */
int sluice__vk_tcp_connect(int *fd, const struct sluice__vk_node *n,
                           uint64_t deadline_ms, uint64_t shown_ms);
int sluice__vk_fd_wait_connected(int fd, const struct sluice__vk_node *n,
                                 uint64_t deadline_ms, uint64_t shown_ms);
ssize_t sluice__vk_fd_read(sluice__vk_wire *w, const struct sluice__vk_node *n,
                           char *buf, size_t len, short *want);
ssize_t sluice__vk_fd_write(sluice__vk_wire *w, const struct sluice__vk_node *n,
                            const char *buf, size_t len, short *want);
bool sluice__vk_fd_pending(const sluice__vk_wire *w);
void sluice__vk_fd_close(sluice__vk_wire *w);
/* A TCP connect that never waits ('*out' is freed by closing 'w'): as a
   transport's start() and resume() answer. */
int sluice__vk_dial_start(sluice__vk_dial **out, sluice__vk_wire *w,
                          const struct sluice__vk_node *n, int *wait_fd,
                          short *want);
int sluice__vk_dial_resume(sluice__vk_dial *d, sluice__vk_wire *w,
                           const struct sluice__vk_node *n, int *wait_fd,
                           short *want);
void sluice__vk_dial_free(sluice__vk_dial *d);
/* ETIMEDOUT for 'doing' on 'n', 'ms' allowed. */
int sluice__vk_timed_out(const struct sluice__vk_node *n, const char *doing,
                         uint64_t ms);
/* Waits until 'fd' is ready for 'events', by 'deadline_ms': 1 ready before
   it, 0 the deadline came first (ready only at or after it counts as the
   deadline, so a peer that keeps sending cannot keep a call past it). */
int sluice__vk_fd_wait(int fd, short events, uint64_t deadline_ms);

/* TLS (tls.c): a store's settings and OpenSSL context, shared by its
   connections. */
typedef struct sluice__vk_tls_opts {
    const char *ca_file, *ca_dir, *cert_file, *key_file, *server_name;
    bool insecure;
} sluice__vk_tls_opts;
int sluice__vk_tls_new(struct sluice__vk_tls **out,
                       const sluice__vk_tls_opts *o);
void sluice__vk_tls_free(struct sluice__vk_tls *t);

/*
 * Connects to node 'n' by its transport within 'connect_timeout_ms' and by
 * the call's 'deadline_ms' (monotonic), whichever comes first ('timeout_ms'
 * is what the message says the call was allowed), and has its reader count
 * into 'caps' (which must outlive the connection) with these caps.
 */
int sluice__vk_wire_open(sluice__vk_wire **out, sluice__vk_caps *caps,
                         const struct sluice__vk_node *n,
                         const struct sluice__vk_tls *tls,
                         uint64_t connect_timeout_ms, uint64_t deadline_ms,
                         uint64_t timeout_ms, uint64_t max_bytes,
                         uint64_t max_elements);
/* Closes 'w' (NULL: nothing) and frees it. */
void sluice__vk_wire_close(sluice__vk_wire *w);
/* Adds a formatted command, or one made of 'argc' arguments, to what 'w'
   sends next; SLUICE_ENOMEM when it cannot. */
int sluice__vk_wire_append(sluice__vk_wire *w, const char *cmd, size_t len);
int sluice__vk_wire_append_argv(sluice__vk_wire *w, int argc, const char **argv,
                                const size_t *lens);
/* Writes what 'w' holds to send, by 'deadline_ms' (monotonic);
   'timeout_ms' is what the message says was allowed. */
int sluice__vk_wire_write(const struct sluice__vk_node *n, sluice__vk_wire *w,
                          uint64_t deadline_ms, uint64_t timeout_ms);
/* Reads one reply by 'deadline_ms', within the caps. Bytes that arrive
   after the deadline are a timeout, and a line ended by a bare LF is
   SLUICE_EPROTO at once. */
int sluice__vk_wire_read(const struct sluice__vk_node *n, sluice__vk_wire *w,
                         sluice__vk_caps *caps, uint64_t deadline_ms,
                         uint64_t timeout_ms, redisReply **out);
/*
 * Looks, without waiting, for what arrived on 'w' that nobody asked for:
 * 0 nothing; 1 bytes (now in its reader); -1 the connection was closed or
 * failed. What a transport reads for itself (a TLS session ticket) is no
 * byte of a reply.
 */
int sluice__vk_wire_peek(const struct sluice__vk_node *n, sluice__vk_wire *w);
/*
 * The same without waiting, for the async API (src/async/): a connect
 * begun (0 connected, 1 in progress: wait for '*want' on '*wait_fd', then
 * resume; or an error with '*out' NULL) and gone on with (0, 1, or an
 * error: the caller closes 'w'); what 'w' holds to send written as far as
 * the socket takes it (0 all, 1 more: wait for '*want'); what the socket
 * has read into the reader (> 0 bytes, 0 none now, or an error: a close by
 * the server is SLUICE_ECONN); and the next whole reply read, with every
 * check sluice__vk_wire_read() makes (1 with '*out', 0 none whole yet, or
 * the error).
 */
int sluice__vk_wire_start(sluice__vk_wire **out, sluice__vk_caps *caps,
                          const struct sluice__vk_node *n,
                          const struct sluice__vk_tls *tls, uint64_t max_bytes,
                          uint64_t max_elements, int *wait_fd, short *want);
int sluice__vk_wire_resume(sluice__vk_wire *w, const struct sluice__vk_node *n,
                           int *wait_fd, short *want);
int sluice__vk_wire_flush(const struct sluice__vk_node *n, sluice__vk_wire *w,
                          short *want);
int sluice__vk_wire_fill(const struct sluice__vk_node *n, sluice__vk_wire *w,
                         short *want);
int sluice__vk_wire_next(const struct sluice__vk_node *n, sluice__vk_wire *w,
                         sluice__vk_caps *caps, redisReply **out);
/* Whether 'w' holds read bytes not yet parsed (its reader's, or the
   transport's): a reply may be whole without the socket being readable. */
bool sluice__vk_wire_buffered(const sluice__vk_wire *w);

#endif /* SLUICE_VALKEY_WIRE_H */
