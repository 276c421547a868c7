/*
 * test_cluster_redirect.c - how the cluster store follows MOVED, ASK and
 * TRYAGAIN, reads CLUSTER SLOTS, and parses cluster URLs, against tiny
 * scripted fake nodes (after libvalkey's fake-node tests of MOVED and ASK).
 *
 * A thread of this test runs three TCP listeners on loopback, the fake
 * nodes A, B and C. Each speaks just enough RESP: it reads arrays of bulk
 * strings (binary-safe, pipelined, split across reads) and answers
 *
 *   CLUSTER SLOTS  a reply the test chose (raw RESP, so it may be malformed),
 *                  and another one once the node has sent a MOVED;
 *   SCRIPT LOAD    the script's SHA1 (the library's, built in);
 *   ASKING         +OK, and the connection's next command is marked "asked";
 *   EVALSHA        per the node's mode: a decision (*4 :1 :9 :0 :60000),
 *                  -MOVED or -ASK to another fake node, -TRYAGAIN a number of
 *                  times, -NOSCRIPT once, a decision only after ASKING (as an
 *                  importing node does; else -MOVED back), or nothing at all;
 *   PING, DEL      +PONG, :1;
 *
 * and logs each command it received (node, connection, name, asked or not).
 * The checks:
 *
 *   - MOVED: the call is sent again at the new node and answered; later
 *     calls for that slot go straight there (one redirect in all, not one
 *     per call), also after the map is reread;
 *   - ASK: ASKING and the command at the new node, on one connection, and
 *     the next call goes to the old node again (ASK is one-shot, and does
 *     not touch the map);
 *   - a node that answers MOVED to itself, or two that send a call back
 *     and forth: exactly MAX_HOPS (5) sends, then SLUICE_ECONN with a
 *     message, quickly;
 *   - TRYAGAIN then a decision: retried, answered; TRYAGAIN forever: a
 *     bounded number of sends, within the command timeout, then an error;
 *   - NOSCRIPT: SCRIPT LOAD at that node, and the call again;
 *   - malformed CLUSTER SLOTS replies and redirections: a clear error, no
 *     crash, no hang; a master with an empty host means the node asked;
 *   - URLs: several seeds, a first seed that is down, every seed down, /0
 *     and /1 on a cluster, several hosts without +cluster, empty seeds.
 */
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */
#include "test.h"
#include "server.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A call must come back within its timeout plus this much slack. */
#define CALL_BOUND_MS 2000
#define MAX_HOPS 5 /* MAX_SENDS, src/valkey/cluster.c */
#define FAKE_SHA "0123456789abcdef0123456789abcdef01234567"

/* ---- The fake nodes ------------------------------------------------------ */

enum eval_mode {
    EV_DECIDE,    /* answer a decision */
    EV_MOVED,     /* -MOVED to 'target' */
    EV_ASK,       /* -ASK to 'target' */
    EV_TRYAGAIN,  /* -TRYAGAIN 'tryagain' times, then decide */
    EV_NOSCRIPT,  /* -NOSCRIPT once, then decide */
    EV_IMPORTING, /* decide after ASKING, else -MOVED to 'target' */
    EV_SILENT,    /* never answer */
    EV_RAW        /* answer 'raw' as it is */
};

enum { NODE_A, NODE_B, NODE_C, NNODES };

typedef struct fake_node {
    int lfd, port;
    /* Behaviour, set by the test. */
    char slots[2048];       /* the CLUSTER SLOTS reply */
    char slots_after[2048]; /* ... once a MOVED was sent, if not empty */
    int close_after_slots;  /* hang up right after CLUSTER SLOTS */
    int mode;
    int target; /* a node index, for MOVED and ASK */
    int tryagain;
    char raw[512];
    /* What happened. */
    int moved_sent;
    int n_slots, n_load, n_eval, n_eval_asked, n_asking, n_other;
} fake_node;

typedef struct log_entry {
    int node, conn, asked;
    char cmd[16];
} log_entry;

#define LOG_MAX 8192
#define MAX_CLIENTS 64

static fake_node nodes[NNODES];
static log_entry fake_log[LOG_MAX];
static int fake_nlog;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fake_stop;
static pthread_t fake_thread;

typedef struct client {
    int fd, node, id, asked;
    char *buf;
    size_t len, cap;
} client;

static const char decision_reply[] = "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n";

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void send_str(int fd, const char *s)
{
    send_all(fd, s, strlen(s));
}

/*
 * Parses one command (an array of bulk strings) at the start of 'buf'.
 * Returns the bytes it took, 0 if more bytes are needed, -1 if malformed.
 */
static long parse_command(const char *buf, size_t len, int *argc,
                          const char **argv, size_t *lens, int max_args)
{
    const char *p = buf, *end = buf + len, *eol;
    long n;

    if (len == 0)
        return 0;
    if (*p != '*')
        return -1;
    if ((eol = memchr(p, '\r', (size_t)(end - p))) == NULL || eol + 1 >= end)
        return 0;
    n = strtol(p + 1, NULL, 10);
    if (n < 1 || n > max_args)
        return -1;
    p = eol + 2;
    for (long i = 0; i < n; i++) {
        long blen;

        if (p >= end)
            return 0;
        if (*p != '$')
            return -1;
        if ((eol = memchr(p, '\r', (size_t)(end - p))) == NULL ||
            eol + 1 >= end)
            return 0;
        blen = strtol(p + 1, NULL, 10);
        if (blen < 0 || blen > (1 << 20))
            return -1;
        p = eol + 2;
        if ((size_t)(end - p) < (size_t)blen + 2)
            return 0;
        argv[i] = p;
        lens[i] = (size_t)blen;
        p += blen + 2;
    }
    *argc = (int)n;
    return p - buf;
}

static int arg_is(const char *arg, size_t len, const char *word)
{
    size_t n = strlen(word);

    if (len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((arg[i] | 0x20) != (word[i] | 0x20))
            return 0;
    return 1;
}

/* The SHA1 that SCRIPT LOAD answers for 'text', as a server would compute
   it: the library's own, built in, for its scripts; FAKE_SHA for others. */
static const char *script_sha(const char *text, size_t len)
{
    for (size_t i = 0; sluice__scripts[i] != NULL; i++)
        if (sluice__scripts[i]->len == len &&
            memcmp(sluice__scripts[i]->text, text, len) == 0)
            return sluice__scripts[i]->sha1;
    return FAKE_SHA;
}

/* Answers one command of client 'c'; returns -1 to hang up. */
static int answer(client *c, int argc, const char **argv, const size_t *lens)
{
    fake_node *n = &nodes[c->node];
    char out[2200];
    int asked = c->asked, hang_up = 0;

    c->asked = 0;
    pthread_mutex_lock(&fake_lock);
    if (fake_nlog < LOG_MAX) {
        log_entry *e = &fake_log[fake_nlog++];

        e->node = c->node;
        e->conn = c->id;
        e->asked = asked;
        snprintf(e->cmd, sizeof(e->cmd), "%.*s",
                 (int)(lens[0] < 15 ? lens[0] : 15), argv[0]);
    }
    out[0] = '\0';
    if (arg_is(argv[0], lens[0], "CLUSTER") && argc == 2 &&
        arg_is(argv[1], lens[1], "SLOTS")) {
        n->n_slots++;
        snprintf(out, sizeof(out), "%s",
                 n->moved_sent && n->slots_after[0] ? n->slots_after
                                                    : n->slots);
        hang_up = n->close_after_slots;
    } else if (arg_is(argv[0], lens[0], "SCRIPT")) {
        n->n_load++;
        snprintf(out, sizeof(out), "$40\r\n%s\r\n",
                 script_sha(argc > 2 ? argv[2] : "", argc > 2 ? lens[2] : 0));
    } else if (arg_is(argv[0], lens[0], "ASKING")) {
        n->n_asking++;
        c->asked = 1;
        snprintf(out, sizeof(out), "+OK\r\n");
    } else if (arg_is(argv[0], lens[0], "EVALSHA") && argc >= 4) {
        unsigned slot = sluice__key_slot(argv[3], lens[3]);
        int target = nodes[n->target].port;

        n->n_eval++;
        n->n_eval_asked += asked;
        switch (n->mode) {
        case EV_MOVED:
            n->moved_sent = 1;
            snprintf(out, sizeof(out), "-MOVED %u 127.0.0.1:%d\r\n", slot,
                     target);
            break;
        case EV_ASK:
            snprintf(out, sizeof(out), "-ASK %u 127.0.0.1:%d\r\n", slot,
                     target);
            break;
        case EV_TRYAGAIN:
            if (n->tryagain > 0) {
                n->tryagain--;
                snprintf(out, sizeof(out), "-TRYAGAIN Multiple keys request "
                         "during rehashing of slot\r\n");
            } else {
                snprintf(out, sizeof(out), "%s", decision_reply);
            }
            break;
        case EV_NOSCRIPT:
            n->mode = EV_DECIDE;
            snprintf(out, sizeof(out), "-NOSCRIPT No matching script. Please "
                     "use EVAL.\r\n");
            break;
        case EV_IMPORTING:
            if (asked)
                snprintf(out, sizeof(out), "%s", decision_reply);
            else
                snprintf(out, sizeof(out), "-MOVED %u 127.0.0.1:%d\r\n", slot,
                         target);
            break;
        case EV_SILENT:
            break;
        case EV_RAW:
            snprintf(out, sizeof(out), "%s", n->raw);
            break;
        default:
            snprintf(out, sizeof(out), "%s", decision_reply);
        }
    } else if (arg_is(argv[0], lens[0], "PING")) {
        n->n_other++;
        snprintf(out, sizeof(out), "+PONG\r\n");
    } else if (arg_is(argv[0], lens[0], "DEL")) {
        n->n_other++;
        snprintf(out, sizeof(out), ":1\r\n");
    } else {
        n->n_other++;
        snprintf(out, sizeof(out), "-ERR unknown command\r\n");
    }
    pthread_mutex_unlock(&fake_lock);
    send_str(c->fd, out);
    return hang_up ? -1 : 0;
}

/* Reads what client 'c' sent and answers every whole command; -1: close. */
static int serve(client *c)
{
    char tmp[16384];
    ssize_t got = recv(c->fd, tmp, sizeof(tmp), 0);
    size_t off = 0;

    if (got <= 0)
        return -1;
    if (c->len + (size_t)got > c->cap) {
        size_t cap = (c->len + (size_t)got) * 2;
        char *b = realloc(c->buf, cap);

        if (b == NULL)
            return -1;
        c->buf = b;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, tmp, (size_t)got);
    c->len += (size_t)got;
    for (;;) {
        const char *argv[32];
        size_t lens[32];
        int argc = 0;
        long took = parse_command(c->buf + off, c->len - off, &argc, argv,
                                  lens, 32);

        if (took < 0)
            return -1;
        if (took == 0)
            break;
        off += (size_t)took;
        if (answer(c, argc, argv, lens) < 0)
            return -1;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return 0;
}

static void *fake_loop(void *arg)
{
    client clients[MAX_CLIENTS];
    int nclients = 0, next_id = 1;

    (void)arg;
    while (!atomic_load(&fake_stop)) {
        struct pollfd p[NNODES + MAX_CLIENTS];
        int np = 0;

        for (int i = 0; i < NNODES; i++)
            p[np++] = (struct pollfd){.fd = nodes[i].lfd, .events = POLLIN};
        for (int i = 0; i < nclients; i++)
            p[np++] = (struct pollfd){.fd = clients[i].fd, .events = POLLIN};
        if (poll(p, (nfds_t)np, 20) <= 0)
            continue;
        for (int i = 0; i < NNODES; i++) {
            int fd;

            if (!(p[i].revents & POLLIN) ||
                (fd = accept(nodes[i].lfd, NULL, NULL)) < 0)
                continue;
            if (nclients == MAX_CLIENTS) {
                close(fd);
                continue;
            }
            clients[nclients++] = (client){.fd = fd, .node = i,
                                           .id = next_id++};
        }
        for (int i = NNODES, k = 0; i < np; i++, k++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            /* clients[] may have shrunk: find this fd again. */
            for (int j = 0; j < nclients; j++) {
                if (clients[j].fd != p[i].fd)
                    continue;
                if (serve(&clients[j]) < 0) {
                    close(clients[j].fd);
                    free(clients[j].buf);
                    clients[j] = clients[--nclients];
                }
                break;
            }
            (void)k;
        }
    }
    for (int i = 0; i < nclients; i++) {
        close(clients[i].fd);
        free(clients[i].buf);
    }
    return NULL;
}

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

static void fake_start(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* B below 34464, so that its port + 65536 has five digits (see
       test_malformed_slots), and below the usual ephemeral range. */
    for (int attempt = 0; attempt < 200 && nodes[NODE_B].lfd <= 0; attempt++) {
        nodes[NODE_B].port = 20000 + (int)((getpid() * 7919u + attempt *
                                            104729u) % 14000u);
        if ((nodes[NODE_B].lfd = listen_loopback(&nodes[NODE_B].port)) < 0)
            nodes[NODE_B].lfd = 0;
    }
    for (int i = 0; i < NNODES; i++) {
        if (i == NODE_B && nodes[i].lfd > 0)
            continue;
        nodes[i].port = 0;
        if ((nodes[i].lfd = listen_loopback(&nodes[i].port)) < 0) {
            fprintf(stderr, "cannot listen on loopback\n");
            exit(2);
        }
    }
    pthread_create(&fake_thread, NULL, fake_loop, NULL);
}

static void fake_stop_all(void)
{
    atomic_store(&fake_stop, 1);
    pthread_join(fake_thread, NULL);
    for (int i = 0; i < NNODES; i++)
        close(nodes[i].lfd);
}

/* A CLUSTER SLOTS reply: every slot served by node 'i'. */
static void slots_all(char *out, size_t cap, int i)
{
    snprintf(out, cap,
             "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "$40\r\n" FAKE_SHA "\r\n",
             nodes[i].port);
}

/* Resets every node to: all slots on A, EVALSHA decides; clears the log. */
static void fake_reset(void)
{
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < NNODES; i++) {
        fake_node *n = &nodes[i];

        slots_all(n->slots, sizeof(n->slots), NODE_A);
        n->slots_after[0] = '\0';
        n->close_after_slots = 0;
        n->mode = EV_DECIDE;
        n->target = i;
        n->tryagain = 0;
        n->raw[0] = '\0';
        n->moved_sent = 0;
        n->n_slots = n->n_load = n->n_eval = n->n_eval_asked = 0;
        n->n_asking = n->n_other = 0;
    }
    fake_nlog = 0;
    pthread_mutex_unlock(&fake_lock);
}

/* Sets node 'i's EVALSHA behaviour. */
static void fake_mode(int i, int mode, int target)
{
    pthread_mutex_lock(&fake_lock);
    nodes[i].mode = mode;
    nodes[i].target = target;
    pthread_mutex_unlock(&fake_lock);
}

/* A counter of node 'i', read under the lock. */
static int fake_get(int i, size_t offset)
{
    int v;

    pthread_mutex_lock(&fake_lock);
    v = *(int *)((char *)&nodes[i] + offset);
    pthread_mutex_unlock(&fake_lock);
    return v;
}

#define GET(i, field) fake_get((i), offsetof(fake_node, field))

/* ---- Helpers ------------------------------------------------------------- */

static sluice_store *open_cluster(const char *seeds, const char *query)
{
    sluice_store *st = NULL;
    char url[512];

    snprintf(url, sizeof(url), "redis+cluster://%s?%s", seeds,
             query != NULL ? query : "timeout=1000&connect_timeout=1000");
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    return st;
}

/* A store whose one seed is fake node 'i'. */
static sluice_store *open_on(int i)
{
    char seed[32];

    snprintf(seed, sizeof(seed), "127.0.0.1:%d", nodes[i].port);
    return open_cluster(seed, NULL);
}

static const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

/* One timed hit on 'key'; '*ms' is how long it took. */
static int timed_hit(sluice_decision *d, sluice_store *st, const char *key,
                     uint64_t *ms)
{
    uint64_t t0 = rs_mono_us();
    int rc;

    memset(d, 0x5a, sizeof(*d));
    rc = sluice_hit(d, st, &lim, key, strlen(key), 1);
    *ms = (rs_mono_us() - t0) / 1000;
    return rc;
}

/* The decision every fake node answers. */
static int is_fake_decision(const sluice_decision *d)
{
    return d->allowed == 1 && d->remaining == 9 && d->retry_after_ms == 0 &&
           d->reset_after_ms == 60000 && d->limit == 10;
}

static uint64_t redirects_of(sluice_store *st)
{
    sluice_store_stats s;

    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_store_stats_get(&s, st));
    return s.redirects;
}

/* ---- MOVED --------------------------------------------------------------- */

static void test_moved(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int loads;

    test_context("MOVED");
    fake_reset();
    /* A serves everything until it has sent a MOVED; then B does. */
    pthread_mutex_lock(&fake_lock);
    slots_all(nodes[NODE_A].slots_after, sizeof(nodes[NODE_A].slots_after),
              NODE_B);
    pthread_mutex_unlock(&fake_lock);
    fake_mode(NODE_A, EV_MOVED, NODE_B);
    st = open_on(NODE_A);

    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_A, n_eval), 1);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 1);
    CHECK_EQ_U64(redirects_of(st), 1);
    loads = GET(NODE_A, n_load);
    /* Later calls for that slot go straight to B: no redirect per call. */
    for (int i = 0; i < 5; i++) {
        CHECK_OK(timed_hit(&d, st, "user1", &ms));
        CHECK(is_fake_decision(&d));
    }
    CHECK_EQ_U64(GET(NODE_A, n_eval), 1);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 6);
    CHECK_EQ_U64(redirects_of(st), 1);
    /* The map is reread (once the refresh gap has passed): B still. */
    rs_sleep_ms(150);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK_OK(timed_hit(&d, st, "user2", &ms));
    CHECK(GET(NODE_A, n_slots) >= 2);
    CHECK_EQ_U64(GET(NODE_A, n_eval), 1);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 8);
    CHECK_EQ_U64(redirects_of(st), 1);
    /* The scripts were loaded once per store, on its first connection
       (A's); B never needed them (a SHA1 is the same everywhere). */
    CHECK(loads > 0);
    CHECK_EQ_U64(GET(NODE_A, n_load), loads);
    CHECK_EQ_U64(GET(NODE_B, n_load), 0);
    sluice_store_free(st);
    test_context(NULL);
}

/* MOVED mends the one slot at once; other slots wait for the reread. */
static void test_moved_mends_one_slot(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int a0;

    test_context("MOVED mends its slot only");
    fake_reset();
    fake_mode(NODE_A, EV_MOVED, NODE_B); /* A's map never changes */
    st = open_on(NODE_A);
    CHECK_OK(timed_hit(&d, st, "one", &ms));
    a0 = GET(NODE_A, n_eval);
    CHECK_EQ_U64(a0, 1);
    /* Another slot: still A's in the map, so A first, then B. */
    CHECK_OK(timed_hit(&d, st, "two", &ms));
    CHECK_EQ_U64(GET(NODE_A, n_eval), 2);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 2);
    CHECK_EQ_U64(redirects_of(st), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- ASK ----------------------------------------------------------------- */

static void test_ask(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int ok_order = 1;

    test_context("ASK");
    fake_reset();
    fake_mode(NODE_A, EV_ASK, NODE_B);
    fake_mode(NODE_B, EV_IMPORTING, NODE_A); /* without ASKING: MOVED to A */
    st = open_on(NODE_A);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(timed_hit(&d, st, "user1", &ms));
        CHECK(is_fake_decision(&d));
    }
    /* Each call: A first (ASK is one-shot), then ASKING + EVALSHA at B. */
    CHECK_EQ_U64(GET(NODE_A, n_eval), 3);
    CHECK_EQ_U64(GET(NODE_B, n_asking), 3);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 3);
    CHECK_EQ_U64(GET(NODE_B, n_eval_asked), 3);
    CHECK_EQ_U64(redirects_of(st), 3);
    /* ASK leaves the map alone: no reread. */
    CHECK_EQ_U64(GET(NODE_A, n_slots), 1);
    CHECK_EQ_U64(GET(NODE_B, n_slots), 0);
    /* The log, in order: A EVALSHA, B ASKING, B EVALSHA (asked, same
       connection), three times. */
    pthread_mutex_lock(&fake_lock);
    {
        int seen = 0;

        for (int i = 0; i < fake_nlog; i++) {
            const log_entry *e = &fake_log[i];

            if (strcmp(e->cmd, "EVALSHA") != 0 || e->node != NODE_A)
                continue;
            seen++;
            ok_order &= i + 2 < fake_nlog &&
                        fake_log[i + 1].node == NODE_B &&
                        strcmp(fake_log[i + 1].cmd, "ASKING") == 0 &&
                        fake_log[i + 2].node == NODE_B &&
                        strcmp(fake_log[i + 2].cmd, "EVALSHA") == 0 &&
                        fake_log[i + 2].asked &&
                        fake_log[i + 2].conn == fake_log[i + 1].conn;
        }
        ok_order &= seen == 3;
    }
    pthread_mutex_unlock(&fake_lock);
    CHECK(ok_order);
    /* When the slot has moved for good, A says MOVED and B serves it. */
    fake_mode(NODE_A, EV_MOVED, NODE_B);
    fake_mode(NODE_B, EV_DECIDE, NODE_B);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK_EQ_U64(GET(NODE_A, n_eval), 4);
    CHECK_EQ_U64(GET(NODE_B, n_eval), 5);
    sluice_store_free(st);

    /* ASK to a node that lacks the script: SCRIPT LOAD there, then
       ASKING and the command once more. */
    test_context("ASK to a node without the script");
    fake_reset();
    fake_mode(NODE_A, EV_ASK, NODE_B);
    fake_mode(NODE_B, EV_NOSCRIPT, NODE_A);
    st = open_on(NODE_A);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_B, n_load), 1);
    CHECK_EQ_U64(GET(NODE_B, n_asking), 2);
    CHECK_EQ_U64(GET(NODE_B, n_eval_asked), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ASK to a node that is down: an error, quickly; the next call goes to A. */
static void test_ask_to_dead_node(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("ASK to a node that is down");
    fake_reset();
    pthread_mutex_lock(&fake_lock);
    nodes[NODE_A].mode = EV_RAW;
    snprintf(nodes[NODE_A].raw, sizeof(nodes[NODE_A].raw),
             "-ASK 1 127.0.0.1:%d\r\n", rs_free_port());
    pthread_mutex_unlock(&fake_lock);
    st = open_on(NODE_A);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(d.allowed == 0 || d.allowed == 0x5a5a5a5a);
    CHECK(ms < CALL_BOUND_MS);
    fake_mode(NODE_A, EV_DECIDE, NODE_A);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_A, n_eval), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Loops and TRYAGAIN -------------------------------------------------- */

static void test_moved_loops(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("MOVED to itself");
    fake_reset();
    fake_mode(NODE_A, EV_MOVED, NODE_A);
    st = open_on(NODE_A);
    for (int round = 1; round <= 2; round++) {
        CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
        CHECK(strstr(sluice_last_error(), "redirected") != NULL);
        CHECK(ms < CALL_BOUND_MS);
        CHECK_EQ_U64(GET(NODE_A, n_eval), MAX_HOPS * round);
    }
    sluice_store_free(st);

    test_context("MOVED back and forth between two nodes");
    fake_reset();
    fake_mode(NODE_A, EV_MOVED, NODE_B);
    fake_mode(NODE_B, EV_MOVED, NODE_A);
    st = open_on(NODE_A);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "redirected") != NULL);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(GET(NODE_A, n_eval) + GET(NODE_B, n_eval), MAX_HOPS);
    /* ASK back and forth, too. */
    fake_mode(NODE_A, EV_ASK, NODE_B);
    fake_mode(NODE_B, EV_ASK, NODE_A);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(GET(NODE_A, n_eval) + GET(NODE_B, n_eval), 2 * MAX_HOPS);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_tryagain(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("TRYAGAIN, then a decision");
    fake_reset();
    fake_mode(NODE_A, EV_TRYAGAIN, NODE_A);
    pthread_mutex_lock(&fake_lock);
    nodes[NODE_A].tryagain = 2;
    pthread_mutex_unlock(&fake_lock);
    st = open_on(NODE_A);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_A, n_eval), 3);
    CHECK_EQ_U64(redirects_of(st), 0);

    test_context("TRYAGAIN forever");
    pthread_mutex_lock(&fake_lock);
    nodes[NODE_A].tryagain = 1000;
    pthread_mutex_unlock(&fake_lock);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    /* Bounded: at least MAX_HOPS tries, and no longer than the command
       timeout (1000 ms) allows. */
    CHECK(ms < 1000 + CALL_BOUND_MS);
    CHECK(GET(NODE_A, n_eval) >= 3 + MAX_HOPS);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_noscript(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int loads;

    test_context("NOSCRIPT at a node that never saw the script");
    fake_reset();
    st = open_on(NODE_A);
    CHECK_OK(timed_hit(&d, st, "user1", &ms)); /* loads the scripts */
    loads = GET(NODE_A, n_load);
    CHECK(loads > 0);
    fake_mode(NODE_A, EV_NOSCRIPT, NODE_A);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_A, n_load), loads + 1); /* that one script */
    CHECK_EQ_U64(GET(NODE_A, n_eval), 3);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_silent_node(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char seed[32];

    test_context("MOVED to a node that never answers");
    fake_reset();
    fake_mode(NODE_A, EV_MOVED, NODE_C);
    fake_mode(NODE_C, EV_SILENT, NODE_C);
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", nodes[NODE_A].port);
    st = open_cluster(seed, "timeout=300&connect_timeout=300");
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ETIMEDOUT);
    CHECK(ms >= 250 && ms < 300 + CALL_BOUND_MS);
    CHECK_EQ_U64(GET(NODE_C, n_eval), 1);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Malformed replies --------------------------------------------------- */

static void test_malformed_slots(void)
{
    /* %d is node B's port. */
    static const char *const bad[] = {
        "+OK\r\n",
        "*0\r\n",
        "$3\r\nfoo\r\n",
        ":5\r\n",
        "*-1\r\n",
        "-ERR This instance has cluster support disabled\r\n",
        "*1\r\n:7\r\n",
        "*1\r\n*2\r\n:0\r\n:16383\r\n",
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:-1\r\n:100\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:200\r\n:100\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n$1\r\n0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n$3\r\nabc\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*-1\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*1\r\n$9\r\n127.0.0.1\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n:1\r\n:%d\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n",
        "*2\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
        "+OK\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:70000\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:-5\r\n",
        /* B's port + 65536: must not wrap around to B (hiredis writes a
           port of up to five digits, and getaddrinfo() keeps 16 bits) */
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "?garbage\r\n",
        "*1\r\n*3\r\n:0\r\n", /* cut short: the node hangs up */
    };
    enum { WRAPPED = 21 };
    int n = (int)(sizeof(bad) / sizeof(bad[0]));

    for (int i = 0; i < n; i++) {
        sluice_store *st;
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("malformed CLUSTER SLOTS #%d", i);
        fake_reset();
        pthread_mutex_lock(&fake_lock);
        /* Every node answers it: a node named in a rejected map must not
           be able to stand in with a good one. */
        for (int k = 0; k < NNODES; k++) {
            snprintf(nodes[k].slots, sizeof(nodes[k].slots), bad[i],
                     nodes[NODE_B].port + (i == WRAPPED ? 65536 : 0));
            nodes[k].close_after_slots = i == n - 1;
        }
        pthread_mutex_unlock(&fake_lock);
        st = open_on(NODE_A);
        rc = timed_hit(&d, st, "user1", &ms);
        if (!CHECK(rc == SLUICE_ECONN || rc == SLUICE_EPROTO) ||
            !CHECK(ms < CALL_BOUND_MS) ||
            !CHECK(sluice_last_error()[0] != '\0'))
            fprintf(stderr, "    reply #%d: rc %s, %" PRIu64 " ms, \"%s\"\n",
                    i, sluice_err_name(rc), ms, sluice_last_error());
        /* Nothing was sent to B: no half-read map was used. */
        CHECK_EQ_U64(GET(NODE_B, n_eval), 0);
        if (getenv("SLUICE_TEST_VERBOSE") != NULL)
            printf("  slots #%-2d %-7s %s\n", i, sluice_err_name(rc),
                   sluice_last_error());
        sluice_store_free(st);
    }
    printf("  %d malformed CLUSTER SLOTS replies: each a clear error\n", n);
    test_context(NULL);
}

/* A map that covers some slots only, and a master given with no host. */
static void test_partial_and_empty_host(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char kbuf[64];
    size_t klen;
    unsigned slot;

    test_context("a map with a hole");
    fake_reset();
    sluice__key_build(kbuf, sizeof(kbuf), &klen, "sluice", "user1", 5,
                      "fixed");
    slot = sluice__key_slot(kbuf, klen);
    pthread_mutex_lock(&fake_lock);
    /* Every slot but user1's. */
    snprintf(nodes[NODE_A].slots, sizeof(nodes[NODE_A].slots),
             "*2\r\n*3\r\n:0\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "*3\r\n:%u\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
             slot - 1, nodes[NODE_A].port, slot + 1, nodes[NODE_A].port);
    pthread_mutex_unlock(&fake_lock);
    st = open_on(NODE_A);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    CHECK_EQ_U64(GET(NODE_A, n_eval), 0);
    sluice_store_free(st);

    /* Empty, or "?" (an endpoint the node does not know): the host of
       the node asked, with the port given. */
    for (int unknown = 0; unknown < 2; unknown++) {
        test_context("a master with %s host is the node asked",
                     unknown ? "a '?'" : "an empty");
        fake_reset();
        pthread_mutex_lock(&fake_lock);
        snprintf(nodes[NODE_A].slots, sizeof(nodes[NODE_A].slots),
                 "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n%s\r\n:%d\r\n",
                 unknown ? "$1\r\n?" : "$0\r\n", nodes[NODE_B].port);
        pthread_mutex_unlock(&fake_lock);
        st = open_on(NODE_A);
        CHECK_OK(timed_hit(&d, st, "user1", &ms));
        CHECK(is_fake_decision(&d));
        CHECK_EQ_U64(GET(NODE_B, n_eval), 1);
        CHECK_EQ_U64(GET(NODE_A, n_eval), 0);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_malformed_redirects(void)
{
    static const char *const bad[] = {
        "-MOVED\r\n",
        "-MOVED 1\r\n",
        "-MOVED 1 \r\n",
        "-MOVED 1 127.0.0.1\r\n",
        "-MOVED 1 127.0.0.1:\r\n",
        "-MOVED 1 :6379\r\n",
        "-MOVED 1 127.0.0.1:0\r\n",
        "-MOVED 1 127.0.0.1:65536\r\n",
        "-MOVED 1 127.0.0.1:99999999999999999999\r\n",
        "-MOVED 1 127.0.0.1:12ab\r\n",
        "-ASK\r\n",
        "-ASK 1 nowhere\r\n",
        "-ASKING\r\n",
        "-MOVEDX 1 127.0.0.1:1\r\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sluice_store *st;
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("malformed redirection '%.*s'",
                     (int)strlen(bad[i]) - 2, bad[i]);
        fake_reset();
        pthread_mutex_lock(&fake_lock);
        nodes[NODE_A].mode = EV_RAW;
        snprintf(nodes[NODE_A].raw, sizeof(nodes[NODE_A].raw), "%s", bad[i]);
        pthread_mutex_unlock(&fake_lock);
        st = open_on(NODE_A);
        rc = timed_hit(&d, st, "user1", &ms);
        if (!CHECK(rc == SLUICE_ECONN || rc == SLUICE_EPROTO) ||
            !CHECK(ms < CALL_BOUND_MS))
            fprintf(stderr, "    rc %s, %" PRIu64 " ms, \"%s\"\n",
                    sluice_err_name(rc), ms, sluice_last_error());
        CHECK(sluice_last_error()[0] != '\0');
        if (getenv("SLUICE_TEST_VERBOSE") != NULL)
            printf("  redirect #%-2zu %-7s %s\n", i, sluice_err_name(rc),
                   sluice_last_error());
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* ---- URLs ---------------------------------------------------------------- */

static void test_urls(void)
{
    static const struct {
        const char *url;
        const char *says;
    } bad[] = {
        {"redis+cluster://127.0.0.1:7000/1", "database 0"},
        {"valkey+cluster://a:1,b:2/3", "database 0"},
        {"redis://a:1,b:2", "cluster"},
        {"valkey://a,b", "cluster"},
        {"redis+cluster://", "host"},
        {"redis+cluster://a:1,,b:2", "host"},
        {"redis+cluster://a:1,", "host"},
        {"redis+cluster://,a:1", "host"},
        {"redis+cluster://a:1,b:0", "port"},
        {"redis+cluster://a:1,b:x", "port"},
        {"redis+cluster://a:1,b c:2", "host"},
        {"redis+cluster://a:1?pool=0", "pool"},
        {"rediss+cluster://a:1", "cluster://"},
        {"redis+clusters://a:1", "cluster://"},
    };
    static const char *const good[] = {
        "redis+cluster://127.0.0.1:7000",
        "valkey+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
        "redis+cluster://h1,h2:2,[::1]:3?timeout=10&pool=1",
        "valkey+cluster://u:p@h1:1,h2:2/0?clock=caller",
        "redis+cluster://h/",
    };
    char many[2048];
    size_t len;
    sluice_store *st = NULL;

    test_context("cluster URLs");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sluice_store_open(&st, bad[i].url, NULL);

        if (!CHECK_RC(rc, SLUICE_EURL) ||
            !CHECK(strstr(sluice_last_error(), bad[i].says) != NULL))
            fprintf(stderr, "    url '%s': \"%s\"\n", bad[i].url,
                    sluice_last_error());
        CHECK(st == NULL);
        sluice_store_free(st);
        st = NULL;
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!CHECK_OK(sluice_store_open(&st, good[i], NULL)))
            fprintf(stderr, "    url '%s'\n", good[i]);
        if (st != NULL)
            CHECK(strcmp(sluice_store_kind(st), "valkey-cluster") == 0);
        sluice_store_free(st);
        st = NULL;
    }
    /* 64 seeds are fine, 65 are too many. */
    len = (size_t)snprintf(many, sizeof(many), "redis+cluster://");
    for (int i = 0; i < 65; i++) {
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%sh%d:%d",
                                i ? "," : "", i, 1000 + i);
        if (i == 63) {
            CHECK_OK(sluice_store_open(&st, many, NULL));
            sluice_store_free(st);
            st = NULL;
        }
    }
    CHECK_RC(sluice_store_open(&st, many, NULL), SLUICE_EURL);
    CHECK(strstr(sluice_last_error(), "64") != NULL);
    test_context(NULL);
}

/* Seeds that are down: the store asks the next one. */
static void test_seeds(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char seeds[128];
    int dead1 = rs_free_port(), dead2 = rs_free_port();

    test_context("the first seed is down, the second up");
    fake_reset();
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d", dead1,
             nodes[NODE_A].port);
    st = open_cluster(seeds, NULL);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK(is_fake_decision(&d));
    CHECK_EQ_U64(GET(NODE_A, n_slots), 1);
    CHECK_EQ_U64(GET(NODE_A, n_eval), 1);
    sluice_store_free(st);

    test_context("several seeds, all up: the first one answers the map");
    fake_reset();
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             nodes[NODE_B].port, nodes[NODE_C].port, nodes[NODE_A].port);
    st = open_cluster(seeds, NULL);
    CHECK_OK(timed_hit(&d, st, "user1", &ms));
    CHECK_EQ_U64(GET(NODE_B, n_slots), 1);
    CHECK_EQ_U64(GET(NODE_C, n_slots) + GET(NODE_A, n_slots), 0);
    CHECK_EQ_U64(GET(NODE_A, n_eval), 1); /* the map says A */
    sluice_store_free(st);

    test_context("every seed is down");
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d", dead1, dead2);
    st = open_cluster(seeds, NULL);
    CHECK_RC(timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(ms < CALL_BOUND_MS);
    CHECK(strstr(sluice_last_error(), "127.0.0.1") != NULL);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    fake_start();
    printf("test_cluster_redirect: fake nodes A:%d B:%d C:%d\n",
           nodes[NODE_A].port, nodes[NODE_B].port, nodes[NODE_C].port);
    test_moved();
    test_moved_mends_one_slot();
    test_ask();
    test_ask_to_dead_node();
    test_moved_loops();
    test_tryagain();
    test_noscript();
    test_silent_node();
    test_malformed_slots();
    test_partial_and_empty_host();
    test_malformed_redirects();
    test_urls();
    test_seeds();
    fake_stop_all();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_redirect");
}
