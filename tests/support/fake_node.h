/*
 * fake_node.h - a scripted fake server node for tests (after libvalkey's
 * fake-node tests of MOVED and ASK): a TCP listener on loopback, served by
 * a thread of its own, that reads commands with hiredis' own reader
 * (arrays of bulk strings, binary-safe, pipelined, split across reads) and
 * answers each with the raw RESP bytes the test chose, so a test can send
 * anything a real server would never send: malformed RESP, huge lengths, a
 * byte at a time, or nothing at all.
 *
 *   fake_node *n = fake_node_start(0, handler, payload);  any free port
 *   fake_node_on(n, "PING", "+PONG\r\n");        a reply by command name
 *   fake_node_pace(n, 500, 150);                 replies held 500 ms, then
 *                                                one byte every 150 ms
 *   fake_node_count(n, "CLUSTER SLOTS")          commands received
 *   fake_node_stop(n);
 *
 * For each command the node calls the handler (if any); it answers with
 * fake_reply(), may hang up after its answer (fake_hang_up()), or answers
 * nothing at all (a server that never answers). Answers go out as each
 * socket takes them, never blocking the node: a client that stops reading
 * a long answer holds up no other. When the handler returns
 * 0, or there is none, the node answers from the replies set with
 * fake_node_on(), else "-ERR unknown command".
 *
 * A command's name is its first word, or its first two ("CLUSTER SLOTS",
 * "SCRIPT LOAD"), in any case: a name of one word matches whatever follows.
 *
 * Every node of the process logs the commands it receives in one log, in
 * the order they arrived (fake_log_*), so a test can check an order across
 * nodes. Handlers run on the nodes' threads, one at a time, under the
 * fakes' lock; a test reads state it shares with its handlers under the
 * same lock (fake_lock()).
 */
#ifndef SLUICE_TEST_FAKE_NODE_H
#define SLUICE_TEST_FAKE_NODE_H

#include <stddef.h>

typedef struct fake_node fake_node;
typedef struct fake_conn fake_conn;

/* One command, as received. */
typedef struct fake_cmd {
    int argc;
    const char *const *argv;
    const size_t *lens;
} fake_cmd;

/*
 * Called for each command 'cmd' on connection 'c'. Returns 1 when it has
 * dealt with it (answered or not), 0 to leave it to fake_node_on()'s
 * replies.
 */
typedef int (*fake_handler)(fake_conn *c, const fake_cmd *cmd,
                            void *payload);

/*
 * Starts a node listening on loopback port 'port', or on any free one when
 * 'port' is 0. 'handler' may be NULL. Returns NULL if it cannot listen.
 */
fake_node *fake_node_start(int port, fake_handler handler, void *payload);
/* Closes every connection and the listener, and frees 'n' (NULL: none). */
void fake_node_stop(fake_node *n);
int fake_node_port(const fake_node *n);

/* The reply (raw RESP, NUL-terminated) to every command named 'name';
   NULL takes it back. */
void fake_node_on(fake_node *n, const char *name, const char *reply);
/* Holds each reply 'delay_ms' before its first byte, then sends it one
   byte every 'drip_ms' (0: whole). */
void fake_node_pace(fake_node *n, unsigned delay_ms, unsigned drip_ms);
/* Forgets the replies set with fake_node_on() and the pace. */
void fake_node_reset(fake_node *n);
/* The commands named 'name' (NULL: all) that 'n' has received since the
   log was last cleared. */
long fake_node_count(fake_node *n, const char *name);

/* ---- Inside a handler ---------------------------------------------------- */

/* Queues 'len' raw bytes as (part of) the answer. */
void fake_reply(fake_conn *c, const char *bytes, size_t len);
/* Queues a printf-formatted answer. */
void fake_replyf(fake_conn *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/*
 * Queues 'count' bytes of 'byte' after what is queued so far, made as they
 * are sent, never held: so a test can send a line of gigabytes from the
 * first byte on, without building it first. One such run a connection at a
 * time; what is queued after it goes after it.
 */
void fake_reply_fill(fake_conn *c, char byte, size_t count);
/* Closes the connection once what is queued is sent. */
void fake_hang_up(fake_conn *c);
/* The node that received the command. */
fake_node *fake_conn_node(const fake_conn *c);
/* The connection's number, 1, 2, ... in the order the node accepted them. */
int fake_conn_id(const fake_conn *c);
/* An int of the test's own for this connection, 0 when it is accepted. */
int *fake_conn_state(fake_conn *c);
/* True when 'cmd' is named 'name' (see the top). */
int fake_cmd_is(const fake_cmd *cmd, const char *name);

/* ---- The log and the lock ------------------------------------------------ */

/* One command received: where, on which connection, its first words. */
typedef struct fake_log_entry {
    const fake_node *node;
    int conn;
    char words[2][24]; /* upper case; "" when absent */
} fake_log_entry;

/* Takes and releases the fakes' lock (not recursive). */
void fake_lock(void);
void fake_unlock(void);
/* The log; call under the lock. The pointer is valid until the log grows
   or is cleared. */
const fake_log_entry *fake_log(size_t *n);
/* True when 'e' is a command named 'name'. */
int fake_log_is(const fake_log_entry *e, const char *name);
/* Empties the log (and so every node's counts). */
void fake_log_clear(void);

#endif /* SLUICE_TEST_FAKE_NODE_H */
