/*
 * queue_fixture.h - what the job-queue tests share: a redis-server of the
 * program's own, run as a queue's server would be (--appendonly yes
 * --appendfsync always), a store on it, and small helpers whose failures
 * are failed checks.
 *
 * The store reaches the server over the transport the program's command
 * line names (queue_start()): "--transport tcp" (the default), "tls"
 * (mutual TLS with the run's certificates), "unix" (a Unix socket only) or
 * "sentinel" (a master and its replica, the store's URL naming the
 * sentinel). The same test binary is registered once per transport
 * (tests/CMakeLists.txt). Raw commands (rs_cmd() on queue_server) go to
 * the master over the launcher's own connection whatever the transport.
 */
#ifndef SLUICE_TEST_QUEUE_FIXTURE_H
#define SLUICE_TEST_QUEUE_FIXTURE_H

#include "server.h"
#include "sluice.h"

#include <stdint.h>

/* The transports queue_start() can run on. */
typedef enum queue_transport {
    QUEUE_TCP,
    QUEUE_TLS,
    QUEUE_UNIX,
    QUEUE_SENTINEL
} queue_transport;

/* The server (the master, under Sentinel) and the store on it, once
   queue_start() has answered 0, and that store's URL: the transport's,
   with "timeout=3000" (fsync always takes a while on a busy disk) as its
   last query option, so a test may append "&opt=v" for its other stores
   on it. */
extern rs_server *queue_server;
extern sluice_store *queue_store;
extern queue_transport queue_on;
extern char queue_url[1536];
/* The server's arguments: an append-only file, fsync always. */
extern const char *const queue_server_args[];

/*
 * Starts the server and the store over the transport 'argv' names
 * ("--transport NAME"; no argument: TCP), printing a line that starts with
 * 'name' and names the transport and the URL. 0, or -1 with the reason on
 * stderr (an unknown argument or transport among them).
 */
int queue_start(const char *name, int argc, char **argv);
void queue_stop(void);

/*
 * The caller's clock, for the cases that move time instead of waiting for
 * it: queue_clock_start() opens a second store on the same server, its URL
 * queue_url with "&clock=caller" and its clock the virtual clock
 * queue_vclock (at 'start_ms'), so that the queue's delays, leases and
 * back-offs count on it; and makes it queue_store, which every helper
 * below uses, until queue_clock_stop() puts the first back. 0, or -1 (a
 * failed check). The cap's window is the counter's PTTL, the server's
 * clock, on either store.
 */
extern sluice_vclock *queue_vclock;
int queue_clock_start(uint64_t start_ms);
void queue_clock_stop(void);

/* Sets the context to 'what' and empties the server (job ids start at 1
   again). */
void queue_fresh(const char *what);
/* Adds 'payload' to 'q' after 'delay_ms'; its id. */
uint64_t queue_add(const char *q, const char *payload, uint64_t delay_ms);
/* One take on 'q'; the status, or 0 if the call failed. */
sluice_take_status queue_take(uint64_t *wait, sluice_job *job, const char *q,
                              uint64_t lease_ms);
/* Takes from 'q' every 5 ms until a job comes or 'bound_ms' passes. */
int queue_take_when_ready(sluice_job *job, const char *q, uint64_t bound_ms);
sluice_queue_stats queue_stats(const char *q);
/* True when the string at 'key' (or its hash 'field') reads 'want'. */
int queue_reads(const char *want, const char *key, const char *field);
/* True when 'wait' is the limiter's PTTL on 's', read just after the call
   that answered it (which began at 't0_us'); else says what they were. */
int queue_wait_is_pttl(rs_server *s, uint64_t wait, const char *limiter,
                       uint64_t t0_us);

#endif /* SLUICE_TEST_QUEUE_FIXTURE_H */
