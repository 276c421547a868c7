/*
 * fake_node.c - the scripted fake node of fake_node.h: a thread per node
 * polls its listener and its connections, feeds what arrives to hiredis'
 * reader, and sends each connection's queued answer at the node's pace.
 */
#include "fake_node.h"
#include "server.h" /* rs_mono_ms() */

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 64
#define MAX_RULES 16
#define MAX_ARGS 2048 /* a batch of 512 keys and its arguments */
#define POLL_MS 20

struct fake_conn {
    fake_node *node;
    int fd, id, state;
    redisReader *reader;
    char *out;           /* queued answer bytes */
    size_t out_len, out_sent, out_cap;
    size_t fill_at, fill_left; /* a run of fill_block[0], at out[fill_at] */
    char fill_block[16384];
    uint64_t send_at_ms; /* when the next byte may go */
    int hang_up;
};

typedef struct rule {
    char name[48];
    char *reply;
} rule;

struct fake_node {
    int lfd, port, next_id;
    fake_handler handler;
    void *payload;
    rule rules[MAX_RULES];
    unsigned delay_ms, drip_ms;
    fake_conn *conns[MAX_CONNS];
    int nconns;
    atomic_int stop;
    pthread_t thread;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_log_entry *log_entries;
static size_t log_len, log_cap;

void fake_lock(void)
{
    pthread_mutex_lock(&lock);
}

void fake_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

/* ---- Names --------------------------------------------------------------- */

/* Does 'word' (of 'len' bytes) equal 'want' (of 'wlen'), in any case? */
static int word_is(const char *word, size_t len, const char *want,
                   size_t wlen)
{
    if (len != wlen)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (toupper((unsigned char)word[i]) != toupper((unsigned char)want[i]))
            return 0;
    return 1;
}

/* Does a command whose first words are 'w0' and 'w1' match 'name'? */
static int name_matches(const char *w0, size_t l0, const char *w1, size_t l1,
                        const char *name)
{
    const char *sp = strchr(name, ' ');

    if (sp == NULL)
        return word_is(w0, l0, name, strlen(name));
    return word_is(w0, l0, name, (size_t)(sp - name)) && w1 != NULL &&
           word_is(w1, l1, sp + 1, strlen(sp + 1));
}

int fake_cmd_is(const fake_cmd *cmd, const char *name)
{
    return cmd->argc > 0 &&
           name_matches(cmd->argv[0], cmd->lens[0],
                        cmd->argc > 1 ? cmd->argv[1] : NULL,
                        cmd->argc > 1 ? cmd->lens[1] : 0, name);
}

int fake_log_is(const fake_log_entry *e, const char *name)
{
    return name_matches(e->words[0], strlen(e->words[0]), e->words[1],
                        strlen(e->words[1]), name);
}

/* ---- The log ------------------------------------------------------------- */

/* Logs 'cmd' from connection 'c'; under the lock. */
static void log_command(const fake_conn *c, const fake_cmd *cmd)
{
    fake_log_entry *e;

    if (log_len == log_cap) {
        size_t cap = log_cap ? 2 * log_cap : 256;
        fake_log_entry *grown = realloc(log_entries, cap * sizeof(*grown));

        if (grown == NULL)
            return;
        log_entries = grown;
        log_cap = cap;
    }
    e = &log_entries[log_len++];
    memset(e, 0, sizeof(*e));
    e->node = c->node;
    e->conn = c->id;
    for (int w = 0; w < 2 && w < cmd->argc; w++) {
        size_t n = cmd->lens[w] < sizeof(e->words[w]) - 1
                       ? cmd->lens[w]
                       : sizeof(e->words[w]) - 1;

        for (size_t i = 0; i < n; i++)
            e->words[w][i] = (char)toupper((unsigned char)cmd->argv[w][i]);
    }
}

const fake_log_entry *fake_log(size_t *n)
{
    *n = log_len;
    return log_entries;
}

void fake_log_clear(void)
{
    fake_lock();
    free(log_entries);
    log_entries = NULL;
    log_len = log_cap = 0;
    fake_unlock();
}

long fake_node_count(fake_node *n, const char *name)
{
    long count = 0;

    fake_lock();
    for (size_t i = 0; i < log_len; i++)
        if (log_entries[i].node == n &&
            (name == NULL || fake_log_is(&log_entries[i], name)))
            count++;
    fake_unlock();
    return count;
}

/* ---- Answers ------------------------------------------------------------- */

/* Whether 'c' has answer bytes not sent yet. */
static int pending(const fake_conn *c)
{
    return c->out_sent < c->out_len || c->fill_left > 0;
}

void fake_reply(fake_conn *c, const char *bytes, size_t len)
{
    if (c->out_len + len > c->out_cap) {
        size_t cap = (c->out_len + len) * 2;
        char *grown = realloc(c->out, cap);

        if (grown == NULL)
            return;
        c->out = grown;
        c->out_cap = cap;
    }
    if (!pending(c))
        c->send_at_ms = rs_mono_ms() + c->node->delay_ms;
    memcpy(c->out + c->out_len, bytes, len);
    c->out_len += len;
}

void fake_reply_fill(fake_conn *c, char byte, size_t count)
{
    if (c->fill_left > 0 || count == 0)
        return; /* one run at a time */
    if (!pending(c))
        c->send_at_ms = rs_mono_ms() + c->node->delay_ms;
    memset(c->fill_block, byte, sizeof(c->fill_block));
    c->fill_at = c->out_len;
    c->fill_left = count;
}

void fake_replyf(fake_conn *c, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0)
        fake_reply(c, buf, (size_t)n < sizeof(buf) ? (size_t)n
                                                   : sizeof(buf) - 1);
}

void fake_hang_up(fake_conn *c)
{
    c->hang_up = 1;
}

fake_node *fake_conn_node(const fake_conn *c)
{
    return c->node;
}

int fake_conn_id(const fake_conn *c)
{
    return c->id;
}

int *fake_conn_state(fake_conn *c)
{
    return &c->state;
}

/* Answers one command: the handler, else a scripted reply, else an error.
   Under the lock. */
static void answer(fake_conn *c, const fake_cmd *cmd)
{
    fake_node *n = c->node;

    log_command(c, cmd);
    if (n->handler != NULL && n->handler(c, cmd, n->payload))
        return;
    for (int i = 0; i < MAX_RULES; i++)
        if (n->rules[i].reply != NULL && fake_cmd_is(cmd, n->rules[i].name)) {
            fake_reply(c, n->rules[i].reply, strlen(n->rules[i].reply));
            return;
        }
    fake_replyf(c, "-ERR unknown command '%.*s'\r\n",
                (int)(cmd->lens[0] < 32 ? cmd->lens[0] : 32), cmd->argv[0]);
}

/* ---- Connections --------------------------------------------------------- */

/*
 * Answers every whole command hiredis' reader holds. Returns -1 when the
 * input is not RESP or not an array of bulk strings: the node hangs up, as
 * a server does on a protocol error.
 */
static int answer_all(fake_conn *c)
{
    /* Once it is to hang up, the node reads nothing more. */
    while (!c->hang_up) {
        void *v = NULL;
        redisReply *r;
        const char *argv[MAX_ARGS];
        size_t lens[MAX_ARGS];
        fake_cmd cmd = {0, argv, lens};

        if (redisReaderGetReply(c->reader, &v) != REDIS_OK)
            return -1;
        if (v == NULL)
            return 0;
        r = v;
        if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
            r->elements > MAX_ARGS) {
            freeReplyObject(r);
            return -1;
        }
        for (size_t i = 0; i < r->elements; i++) {
            if (r->element[i]->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -1;
            }
            argv[cmd.argc] = r->element[i]->str;
            lens[cmd.argc++] = r->element[i]->len;
        }
        fake_lock();
        answer(c, &cmd);
        fake_unlock();
        freeReplyObject(r);
    }
    return 0;
}

/* Reads what arrived on 'c' and answers it; -1: close the connection. */
static int serve_input(fake_conn *c)
{
    char buf[16384];
    ssize_t got = recv(c->fd, buf, sizeof(buf), 0);

    if (got <= 0)
        return got < 0 && (errno == EINTR || errno == EAGAIN) ? 0 : -1;
    if (redisReaderFeed(c->reader, buf, (size_t)got) != REDIS_OK)
        return -1;
    return answer_all(c);
}

/* Sends what is due of c's answer: its queued bytes, and the run of fill
   bytes where it stands among them; -1: close the connection. */
static int serve_output(fake_conn *c, uint64_t now)
{
    int filling = c->fill_left > 0 && c->out_sent == c->fill_at;
    const char *from;
    size_t n;
    ssize_t w;

    if (!pending(c))
        return c->hang_up ? -1 : 0;
    if (now < c->send_at_ms)
        return 0;
    if (filling) {
        from = c->fill_block;
        n = c->fill_left < sizeof(c->fill_block) ? c->fill_left
                                                 : sizeof(c->fill_block);
    } else {
        from = c->out + c->out_sent;
        n = (c->fill_left > 0 ? c->fill_at : c->out_len) - c->out_sent;
    }
    if (c->node->drip_ms > 0)
        n = 1;
    /* Never blocks: a long answer to a client that reads slowly (or not at
       all) goes as the socket takes it, and the node serves the others. */
    w = send(c->fd, from, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (filling)
        c->fill_left -= (size_t)w;
    else
        c->out_sent += (size_t)w;
    c->send_at_ms = now + c->node->drip_ms;
    if (!pending(c)) {
        c->out_sent = c->out_len = 0;
        return c->hang_up ? -1 : 0;
    }
    return 0;
}

static void conn_free(fake_conn *c)
{
    close(c->fd);
    redisReaderFree(c->reader);
    free(c->out);
    free(c);
}

static void accept_conn(fake_node *n)
{
    int fd = accept(n->lfd, NULL, NULL);
    fake_conn *c;

    if (fd < 0)
        return;
    if (n->nconns == MAX_CONNS || (c = calloc(1, sizeof(*c))) == NULL) {
        close(fd);
        return;
    }
    c->node = n;
    c->fd = fd;
    c->id = ++n->next_id;
    if ((c->reader = redisReaderCreate()) == NULL) {
        close(fd);
        free(c);
        return;
    }
    n->conns[n->nconns++] = c;
}

/* ---- The node's thread --------------------------------------------------- */

/* Whether 'c' has answer bytes due now: the node then waits for its
   socket to take them (POLLOUT). */
static int output_due(const fake_conn *c, uint64_t now)
{
    return pending(c) && c->send_at_ms <= now;
}

/* How long poll() may wait: until the next byte is due, at most POLL_MS;
   bytes due already wait for POLLOUT. (Only the node's thread touches its
   connections.) */
static int poll_timeout(const fake_node *n, uint64_t now)
{
    uint64_t wait = POLL_MS;

    for (int i = 0; i < n->nconns; i++) {
        const fake_conn *c = n->conns[i];

        if (pending(c) && c->send_at_ms > now &&
            c->send_at_ms - now < wait)
            wait = c->send_at_ms - now;
    }
    return (int)wait;
}

/* One round of the loop over connection 'i': input, then output. Returns
   -1 when the connection is to be closed. */
static int serve_conn(fake_node *n, int i, short revents)
{
    fake_conn *c = n->conns[i];
    int rc = 0;

    if (revents & (POLLIN | POLLHUP | POLLERR))
        rc = serve_input(c);
    if (rc == 0) {
        fake_lock();
        rc = serve_output(c, rs_mono_ms());
        fake_unlock();
    }
    return rc;
}

static void *node_loop(void *arg)
{
    fake_node *n = arg;

    while (!atomic_load(&n->stop)) {
        struct pollfd p[MAX_CONNS + 1];
        int np = 0, nc = n->nconns;
        uint64_t now = rs_mono_ms();

        p[np++] = (struct pollfd){.fd = n->lfd, .events = POLLIN};
        for (int i = 0; i < nc; i++)
            p[np++] = (struct pollfd){
                .fd = n->conns[i]->fd,
                .events = (short)(POLLIN | (output_due(n->conns[i], now)
                                                ? POLLOUT : 0))};
        if (poll(p, (nfds_t)np, poll_timeout(n, now)) < 0 && errno != EINTR)
            break;
        /* From the last, so closing one moves none still to be seen. */
        for (int i = nc - 1; i >= 0; i--) {
            if (serve_conn(n, i, p[i + 1].revents) < 0) {
                conn_free(n->conns[i]);
                n->conns[i] = n->conns[--n->nconns];
            }
        }
        if (p[0].revents & POLLIN)
            accept_conn(n);
    }
    return NULL;
}

/* ---- Starting and stopping ----------------------------------------------- */

/* Listens on loopback port '*port', or on any free one when it is 0. */
static int listen_loopback(int *port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)*port);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

fake_node *fake_node_start(int port, fake_handler handler, void *payload)
{
    fake_node *n = calloc(1, sizeof(*n));

    if (n == NULL)
        return NULL;
    n->port = port;
    if ((n->lfd = listen_loopback(&n->port)) < 0) {
        free(n);
        return NULL;
    }
    n->handler = handler;
    n->payload = payload;
    atomic_init(&n->stop, 0);
    signal(SIGPIPE, SIG_IGN);
    if (pthread_create(&n->thread, NULL, node_loop, n) != 0) {
        close(n->lfd);
        free(n);
        return NULL;
    }
    return n;
}

void fake_node_stop(fake_node *n)
{
    if (n == NULL)
        return;
    atomic_store(&n->stop, 1);
    pthread_join(n->thread, NULL);
    for (int i = 0; i < n->nconns; i++)
        conn_free(n->conns[i]);
    close(n->lfd);
    fake_node_reset(n);
    free(n);
}

int fake_node_port(const fake_node *n)
{
    return n->port;
}

void fake_node_on(fake_node *n, const char *name, const char *reply)
{
    rule *free_slot = NULL;

    fake_lock();
    for (int i = 0; i < MAX_RULES; i++) {
        rule *r = &n->rules[i];

        if (r->reply != NULL && strcmp(r->name, name) == 0) {
            free(r->reply);
            r->reply = NULL;
        }
        if (r->reply == NULL && free_slot == NULL)
            free_slot = r;
    }
    if (reply != NULL && free_slot != NULL) {
        snprintf(free_slot->name, sizeof(free_slot->name), "%s", name);
        free_slot->reply = strdup(reply);
    }
    fake_unlock();
}

void fake_node_pace(fake_node *n, unsigned delay_ms, unsigned drip_ms)
{
    fake_lock();
    n->delay_ms = delay_ms;
    n->drip_ms = drip_ms;
    fake_unlock();
}

void fake_node_reset(fake_node *n)
{
    fake_lock();
    for (int i = 0; i < MAX_RULES; i++) {
        free(n->rules[i].reply);
        n->rules[i].reply = NULL;
    }
    n->delay_ms = n->drip_ms = 0;
    fake_unlock();
}
