/*
 * sentinel.c - the master, replica and redis-sentinel of server.h's
 * "Sentinel" section: three rs_servers, so each is killed on every way out
 * like any other server.
 */
#include "server.h"
#include "tls_certs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define POLL_MS 50

/* ---- Reading the sentinel ------------------------------------------------ */

/*
 * The value of 'field' in a reply of field/value pairs (one element of
 * SENTINEL MASTER or SENTINEL REPLICAS), or "" when it has none.
 */
static const char *pair_value(const redisReply *r, const char *field)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return "";
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[i]->str, field) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1]->str;
    return "";
}

/* True when the sentinel holds the master up (flags exactly "master"). */
static int master_up(rs_sentinel *st)
{
    redisReply *r = rs_cmd(&st->sentinel, "SENTINEL MASTER %s",
                           RS_SENTINEL_MASTER);
    int up = strcmp(pair_value(r, "flags"), "master") == 0;

    if (r != NULL)
        freeReplyObject(r);
    return up;
}

/*
 * True when the sentinel lists the node on 'port' as a replica that is up
 * (flags exactly "slave"). What the replica itself says is read from it:
 * the sentinel refreshes its view of a replica only every 10 s.
 */
static int sentinel_lists_replica(rs_sentinel *st, int port)
{
    redisReply *r = rs_cmd(&st->sentinel, "SENTINEL REPLICAS %s",
                           RS_SENTINEL_MASTER);
    int listed = 0;

    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY &&
                       i < r->elements && !listed;
         i++)
        listed = strcmp(pair_value(r->element[i], "flags"), "slave") == 0 &&
                 atoi(pair_value(r->element[i], "port")) == port;
    if (r != NULL)
        freeReplyObject(r);
    return listed;
}

/* True when node 's' says it replicates from 'master_port', link up. */
static int replicating(rs_server *s, int master_port)
{
    redisReply *r = rs_cmd(s, "INFO replication");
    char want[32];
    int yes;

    snprintf(want, sizeof(want), "master_port:%d\r\n", master_port);
    yes = r != NULL && r->type == REDIS_REPLY_STRING &&
          strstr(r->str, "role:slave") != NULL &&
          strstr(r->str, "master_link_status:up") != NULL &&
          strstr(r->str, want) != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return yes;
}

int rs_sentinel_master_port(rs_sentinel *st)
{
    redisReply *r = rs_cmd(&st->sentinel,
                           "SENTINEL GET-MASTER-ADDR-BY-NAME %s",
                           RS_SENTINEL_MASTER);
    int port = -1;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    if (r != NULL)
        freeReplyObject(r);
    return port;
}

rs_server *rs_sentinel_master(rs_sentinel *st)
{
    int port = rs_sentinel_master_port(st);

    for (int i = 0; i < 2; i++)
        if (port > 0 && st->nodes[i].port == port)
            return &st->nodes[i];
    return NULL;
}

/* ---- Waiting ------------------------------------------------------------- */

int rs_sentinel_wait_seen(rs_sentinel *st, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;

    while (rs_mono_ms() < deadline) {
        rs_server *m = rs_sentinel_master(st);
        rs_server *r = m == &st->nodes[0] ? &st->nodes[1] : &st->nodes[0];

        if (m != NULL && master_up(st) && r->pid > 0 &&
            replicating(r, m->port) && sentinel_lists_replica(st, r->port))
            return 0;
        rs_sleep_ms(POLL_MS);
    }
    fprintf(stderr, "sentinel.c: the sentinel did not see a master and a "
            "linked replica within %llu ms\n",
            (unsigned long long)timeout_ms);
    return -1;
}

int rs_sentinel_rejoin(rs_sentinel *st, rs_server *node)
{
    int port = rs_sentinel_master_port(st);

    if (port < 0 || port == node->port) {
        fprintf(stderr, "sentinel.c: rejoin: the sentinel names %d as the "
                "master\n", port);
        return -1;
    }
    if (rs_ok(node, "REPLICAOF 127.0.0.1 %d", port) < 0)
        return -1;
    return rs_sentinel_wait_seen(st, RS_SENTINEL_READY_TIMEOUT_MS);
}

int rs_sentinel_wait_master(rs_sentinel *st, int port, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;

    while (rs_mono_ms() < deadline) {
        if (rs_sentinel_master_port(st) == port)
            return 0;
        rs_sleep_ms(POLL_MS);
    }
    fprintf(stderr, "sentinel.c: the sentinel did not name port %d as the "
            "master within %llu ms\n", port, (unsigned long long)timeout_ms);
    return -1;
}

int rs_sentinel_failover(rs_sentinel *st)
{
    rs_server *old = rs_sentinel_master(st);
    rs_server *next;

    if (old == NULL) {
        fprintf(stderr, "sentinel.c: the sentinel names no master of ours\n");
        return -1;
    }
    next = old == &st->nodes[0] ? &st->nodes[1] : &st->nodes[0];
    if (rs_ok(&st->sentinel, "SENTINEL FAILOVER %s", RS_SENTINEL_MASTER) < 0)
        return -1;
    if (rs_sentinel_wait_master(st, next->port,
                                RS_SENTINEL_FAILOVER_TIMEOUT_MS) < 0 ||
        rs_sentinel_rejoin(st, old) < 0)
        return -1;
    return next->port;
}

/* ---- Starting and stopping ----------------------------------------------- */

/* The sentinel's configuration for a master on 'port'; 'password' or NULL. */
static void sentinel_conf(char *out, size_t cap, int port,
                          const char *password)
{
    const char *m = RS_SENTINEL_MASTER;
    size_t n;

    n = (size_t)snprintf(out, cap,
                         "sentinel resolve-hostnames no\n"
                         "sentinel announce-ip 127.0.0.1\n"
                         "sentinel monitor %s 127.0.0.1 %d 1\n"
                         "sentinel down-after-milliseconds %s %d\n"
                         "sentinel failover-timeout %s %d\n"
                         "sentinel parallel-syncs %s 1\n",
                         m, port, m, RS_SENTINEL_DOWN_AFTER_MS, m,
                         RS_SENTINEL_FAILOVER_TIMEOUT_MS, m);
    if (password != NULL && n < cap)
        snprintf(out + n, cap - n, "sentinel auth-pass %s %s\n", m,
                 password);
}

/*
 * 'extra' with the arguments every data node gets first (loopback
 * announcements, a quick first sync) and, for the replica, --replicaof
 * 'port' (0: none), into 'args' (room for RS_MAX_EXTRA + 1); with
 * --requirepass, --masterauth the same. 0 or -1.
 */
static int node_args(const char **args, const char *const *extra,
                     char *master_port, int port)
{
    int n = 0;

    args[n++] = "--replica-announce-ip";
    args[n++] = "127.0.0.1";
    args[n++] = "--repl-diskless-sync-delay";
    args[n++] = "0";
    if (port > 0) {
        snprintf(master_port, 16, "%d", port);
        args[n++] = "--replicaof";
        args[n++] = "127.0.0.1";
        args[n++] = master_port;
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (n + 2 >= RS_MAX_EXTRA) {
            fprintf(stderr, "sentinel.c: too many extra arguments\n");
            return -1;
        }
        args[n++] = extra[i];
        /* Either node may be the other's replica after a failover. */
        if (i > 0 && strcmp(extra[i - 1], "--requirepass") == 0) {
            args[n++] = "--masterauth";
            args[n++] = extra[i];
        }
    }
    args[n] = NULL;
    return 0;
}

int rs_sentinel_start(rs_sentinel *st, const char *const *extra,
                      const char *const *sentinel_extra)
{
    const char *args[RS_MAX_EXTRA + 1];
    char mport[16], conf[1024];

    memset(st, 0, sizeof(*st));
    if (node_args(args, extra, mport, 0) < 0 ||
        rs_start(&st->nodes[0], args) < 0)
        goto fail;
    if (node_args(args, extra, mport, st->nodes[0].port) < 0 ||
        rs_start(&st->nodes[1], args) < 0)
        goto fail;
    sentinel_conf(conf, sizeof(conf), st->nodes[0].port,
                  st->nodes[0].password);
    if (rs_start_sentinel(&st->sentinel, conf, sentinel_extra) < 0 ||
        rs_sentinel_wait_seen(st, RS_SENTINEL_READY_TIMEOUT_MS) < 0)
        goto fail;
    snprintf(st->url, sizeof(st->url), "valkey+sentinel://127.0.0.1:%d/%s",
             st->sentinel.port, RS_SENTINEL_MASTER);
    return 0;
fail:
    rs_sentinel_stop(st);
    return -1;
}

int rs_sentinel_start_tls(rs_sentinel *st)
{
    const rs_certs *c = rs_certs_get();
    const char *args[RS_MAX_EXTRA + 1];
    const char *tls_repl[] = {"--tls-replication", "yes", NULL};
    char mport[16], conf[2048];
    size_t n;

    memset(st, 0, sizeof(*st));
    if (c == NULL || node_args(args, tls_repl, mport, 0) < 0 ||
        rs_start_tls(&st->nodes[0], "no", args) < 0)
        goto fail;
    if (node_args(args, tls_repl, mport, st->nodes[0].port) < 0 ||
        rs_start_tls(&st->nodes[1], "no", args) < 0)
        goto fail;
    if ((st->tls_port = rs_free_port()) < 0)
        goto fail;
    sentinel_conf(conf, sizeof(conf), st->nodes[0].port, NULL);
    n = strlen(conf);
    /* TLS to the nodes it watches (tls-replication), and on a port of its
       own for clients; the harness keeps the plain one. */
    snprintf(conf + n, sizeof(conf) - n,
             "tls-port %d\ntls-replication yes\ntls-cert-file %s\n"
             "tls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients no\n",
             st->tls_port, c->server_cert, c->server_key, c->ca_cert);
    if (rs_start_sentinel(&st->sentinel, conf, NULL) < 0 ||
        rs_sentinel_wait_seen(st, RS_SENTINEL_READY_TIMEOUT_MS) < 0)
        goto fail;
    snprintf(st->url, sizeof(st->url), "valkeys+sentinel://127.0.0.1:%d/%s",
             st->tls_port, RS_SENTINEL_MASTER);
    return 0;
fail:
    rs_sentinel_stop(st);
    return -1;
}

/* A held port's listener: every connection reset at once (SO_LINGER 0),
   as a port with nothing on it refuses one, until the socket is shut. */
static void *refuse_all(void *arg)
{
    int fd = (int)(intptr_t)arg, c;
    struct linger now = {1, 0};

    while ((c = accept(fd, NULL, NULL)) >= 0 || errno == EINTR)
        if (c >= 0) {
            setsockopt(c, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
            close(c);
        }
    return NULL;
}

void rs_sentinel_kill(rs_sentinel *st, rs_server *node)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int i = node == &st->nodes[0] ? 0 : 1, one = 1;
    int fd;

    rs_kill(node);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)node->port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 &&
        (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
         bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
         listen(fd, 16) < 0 ||
         pthread_create(&st->holder[i], NULL, refuse_all,
                        (void *)(intptr_t)fd) != 0)) {
        fprintf(stderr, "sentinel.c: cannot hold port %d: %s\n", node->port,
                strerror(errno));
        close(fd);
        fd = -1;
    }
    st->held[i] = fd + 1; /* 0: nothing held */
}

void rs_sentinel_stop(rs_sentinel *st)
{
    rs_stop(&st->sentinel);
    rs_stop(&st->nodes[1]);
    rs_stop(&st->nodes[0]);
    for (int i = 0; i < 2; i++)
        if (st->held[i] > 0) {
            shutdown(st->held[i] - 1, SHUT_RDWR); /* ends its accept() */
            pthread_join(st->holder[i], NULL);
            close(st->held[i] - 1);
            st->held[i] = 0;
        }
}
