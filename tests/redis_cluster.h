/*
 * redis_cluster.h - a private Redis Cluster for one test program.
 *
 * Built on redis_server.h: every node is an rs_server started with
 * rs_start_cluster_node() (its own directory, its own state file, a free
 * port and a free bus port), so the nodes are killed on every way out just
 * like a single server, by the same registry, handlers and PR_SET_PDEATHSIG.
 *
 *   rc_cluster c;
 *   rc_start(&c, 3, 1, NULL)    6 nodes: 3 masters with a replica each, made
 *                               by `redis-cli --cluster create`; returns when
 *                               every node says cluster_state:ok and all of
 *                               them agree on the map and the roles, and
 *                               every replica's link is up. c.url is
 *                               "redis+cluster://127.0.0.1:P1,...". With one
 *                               master and no replica, the node is given all
 *                               16384 slots by hand (ADDSLOTSRANGE).
 *   rc_refresh(&c)              reread the roles, ids and the slot map
 *                               (c.owner[slot], c.nodes[i].master) from
 *                               CLUSTER NODES.
 *   rc_cmdargv(&c, -1, ...)     a raw command that follows MOVED and ASK
 *                               like a cluster client; 'at' picks the first
 *                               node to ask (-1: the first live master).
 *   rc_keyslot(&c, key, len)    the server's CLUSTER KEYSLOT of a key.
 *   rc_reshard(&c, from, to, n) `redis-cli --cluster reshard`: moves n slots.
 *   rc_kill(&c, i)              SIGKILL node i (a crash); rc_wait_promoted()
 *                               waits for one of its replicas to take over.
 *   rc_stop(&c)                 stop every node and remove its directory.
 *
 * Nodes run with a short --cluster-node-timeout (RC_NODE_TIMEOUT_MS) so a
 * failover takes seconds, --cluster-require-full-coverage no so the masters
 * that are still up keep serving their own slots while one master is down
 * (the default would answer CLUSTERDOWN for every slot until a replica is
 * promoted), --cluster-replica-validity-factor 0 so a replica may always
 * take over, however slow the machine, and --repl-diskless-sync-delay 0 so
 * a replica's first sync starts at once (not 5 s later).
 *
 * Everything here is static inline: include it (after redis_server.h, which
 * it includes) in one test file. Functions print their failures to stderr
 * and return -1 (or NULL); the caller decides whether that fails the test.
 * Call them from the main thread: a node dies with the thread that started
 * it (PR_SET_PDEATHSIG), and rc_cmdargv() uses the helper connections of
 * redis_server.h, which are not shared between threads.
 */
#ifndef SLUICE_TEST_REDIS_CLUSTER_H
#define SLUICE_TEST_REDIS_CLUSTER_H

#include "redis_server.h"

#include <poll.h>

#define RC_MAX_NODES 8
#define RC_SLOTS 16384
#define RC_NODE_TIMEOUT_MS 1000
#define RC_READY_TIMEOUT_MS 30000
#define RC_CLI_TIMEOUT_MS 120000
#define RC_CLI_BINARY "redis-cli"

typedef struct rc_node {
    rs_server srv;
    char id[41];   /* the node's cluster id; "" until rc_refresh() */
    int is_master; /* as of the last rc_refresh() */
    int master;    /* a replica's master (an index), else -1 */
    int dead;      /* killed by rc_kill() */
} rc_node;

typedef struct rc_cluster {
    int n;
    rc_node nodes[RC_MAX_NODES];
    /* The master (an index) serving each slot as of the last rc_refresh(),
       or -1. */
    int owner[RC_SLOTS];
    /* "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,..." with every node. */
    char url[RC_MAX_NODES * 24 + 32];
} rc_cluster;

/* ---- Small utilities ----------------------------------------------------- */

/* The index of the node listening on 'port', or -1. */
static inline int rc_node_by_port(const rc_cluster *c, int port)
{
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i].srv.port == port)
            return i;
    return -1;
}

/* The index of the node with cluster id 'id' (of 'len' bytes), or -1. */
static inline int rc_node_by_id(const rc_cluster *c, const char *id,
                                size_t len)
{
    for (int i = 0; i < c->n; i++)
        if (len == 40 && memcmp(c->nodes[i].id, id, 40) == 0)
            return i;
    return -1;
}

/* The first node that was not killed, or -1. */
static inline int rc_first_live(const rc_cluster *c, int masters_only)
{
    for (int i = 0; i < c->n; i++)
        if (!c->nodes[i].dead && (!masters_only || c->nodes[i].is_master))
            return i;
    return -1;
}

/*
 * Runs a program ('argv', NULL-terminated; argv[0] is looked up in PATH),
 * its stdout and stderr read into 'out' (cut to 'cap'), killed after
 * 'timeout_ms'. Returns its exit status, or -1 if it could not run, was
 * killed or timed out. The child only calls async-signal-safe functions
 * before exec, so this is safe while other threads run.
 */
static inline int rc_run(const char *const *argv, char *out, size_t cap,
                         uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;
    size_t used = 0;
    int fds[2], status = 0, devnull;
    pid_t parent = getpid(), pid;

    if (cap > 0)
        out[0] = '\0';
    if (pipe(fds) < 0) {
        fprintf(stderr, "redis_cluster.h: pipe: %s\n", strerror(errno));
        return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    devnull = open("/dev/null", O_RDONLY);
    fflush(NULL);
    if ((pid = fork()) < 0) {
        fprintf(stderr, "redis_cluster.h: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        if (devnull >= 0)
            close(devnull);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    if (devnull >= 0)
        close(devnull);
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        uint64_t now = rs_mono_ms();
        char buf[4096];
        ssize_t got;

        if (now >= deadline) {
            fprintf(stderr, "redis_cluster.h: %s did not finish within %llu "
                    "ms; killed\n", argv[0], (unsigned long long)timeout_ms);
            kill(pid, SIGKILL);
            status = -1;
            break;
        }
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        if ((got = read(fds[0], buf, sizeof(buf))) <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            break;
        }
        for (ssize_t i = 0; i < got && used + 1 < cap; i++)
            out[used++] = buf[i];
        if (cap > 0)
            out[used] = '\0';
    }
    close(fds[0]);
    {
        int st;

        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (status == 0)
            status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    return status;
}

/* ---- The map ------------------------------------------------------------- */

/*
 * Parses one node's CLUSTER NODES text into 'owner' (a slot's master, as a
 * node index) and, per node, its role and master. Open slots ("[5-<-id]")
 * are skipped. 'sig' gets a summary that two nodes agree on iff they agree
 * on the roles and the map (the slots are in 'owner'). Returns -1 on a line
 * it cannot read or a node it does not know.
 */
static inline int rc_parse_nodes(rc_cluster *c, const char *text, int *owner,
                                 int *is_master, int *master_of, char *sig,
                                 size_t sig_cap)
{
    const char *line = text;
    size_t sig_len = 0;
    char roles[RC_MAX_NODES][24];

    for (int s = 0; s < RC_SLOTS; s++)
        owner[s] = -1;
    for (int i = 0; i < c->n; i++) {
        is_master[i] = 0;
        master_of[i] = -1;
        roles[i][0] = '\0';
    }
    if (sig_cap > 0)
        sig[0] = '\0';
    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[4096], *field[64], *save = NULL, *tok;
        int nf = 0, idx, port;
        char *at, *colon;

        if (len >= sizeof(buf)) {
            fprintf(stderr, "redis_cluster.h: CLUSTER NODES line too long\n");
            return -1;
        }
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (len > 0 && buf[len - 1] == '\r')
            buf[len - 1] = '\0';
        line += len + (eol ? 1 : 0);
        for (tok = strtok_r(buf, " ", &save); tok != NULL && nf < 64;
             tok = strtok_r(NULL, " ", &save))
            field[nf++] = tok;
        if (nf == 0)
            continue;
        if (nf < 8 || strlen(field[0]) != 40) {
            fprintf(stderr, "redis_cluster.h: bad CLUSTER NODES line\n");
            return -1;
        }
        /* "ip:port@cport[,hostname]" */
        if ((at = strchr(field[1], '@')) != NULL)
            *at = '\0';
        colon = strrchr(field[1], ':');
        port = colon ? atoi(colon + 1) : -1;
        if ((idx = rc_node_by_port(c, port)) < 0) {
            fprintf(stderr, "redis_cluster.h: CLUSTER NODES names port %d, "
                    "which is not ours\n", port);
            return -1;
        }
        memcpy(c->nodes[idx].id, field[0], 40);
        c->nodes[idx].id[40] = '\0';
        is_master[idx] = strstr(field[2], "master") != NULL;
        snprintf(roles[idx], sizeof(roles[idx]), "%d:%s:%.8s ", idx,
                 is_master[idx] ? "M" : "S", field[3]);
        for (int f = 8; f < nf; f++) {
            char *dash;
            long lo, hi;

            if (field[f][0] == '[')
                continue;
            lo = strtol(field[f], &dash, 10);
            hi = *dash == '-' ? strtol(dash + 1, NULL, 10) : lo;
            if (lo < 0 || hi >= RC_SLOTS || lo > hi) {
                fprintf(stderr, "redis_cluster.h: bad slot range '%s'\n",
                        field[f]);
                return -1;
            }
            for (long s = lo; s <= hi; s++)
                owner[s] = idx;
        }
    }
    /* The summary, in node order (each node lists the others in its own
       order). */
    for (int i = 0; i < c->n; i++)
        if (sig_len + sizeof(roles[i]) < sig_cap)
            sig_len += (size_t)snprintf(sig + sig_len, sig_cap - sig_len,
                                        "%s", roles[i]);
    /* Now that every id is known: each replica's master. */
    line = text;
    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *sp1, *sp2, *sp3;
        int self, m;

        sp1 = memchr(line, ' ', len);
        sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line)) : NULL;
        sp3 = sp2 ? memchr(sp2 + 1, ' ', len - (size_t)(sp2 + 1 - line)) : NULL;
        if (sp3 != NULL && sp1 - line == 40 && line + len - sp3 > 40 &&
            (self = rc_node_by_id(c, line, 40)) >= 0 &&
            (m = rc_node_by_id(c, sp3 + 1, 40)) >= 0)
            master_of[self] = m;
        line += len + (eol ? 1 : 0);
    }
    return 0;
}

/* CLUSTER NODES of node 'i' as a string (the caller frees it), or NULL. */
static inline char *rc_nodes_text(rc_cluster *c, int i)
{
    redisReply *r = rs_cmd(&c->nodes[i].srv, "CLUSTER NODES");
    char *text = NULL;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        text = strdup(r->str);
    if (r != NULL)
        freeReplyObject(r);
    return text;
}

/*
 * Rereads roles, ids and the map from the first live node (or node 'from'
 * when >= 0). Returns 0 or -1.
 */
static inline int rc_refresh_from(rc_cluster *c, int from)
{
    int is_master[RC_MAX_NODES], master_of[RC_MAX_NODES];
    int i = from >= 0 ? from : rc_first_live(c, 0);
    char *text, sig[1024];
    int rc;

    if (i < 0 || (text = rc_nodes_text(c, i)) == NULL)
        return -1;
    rc = rc_parse_nodes(c, text, c->owner, is_master, master_of, sig,
                        sizeof(sig));
    free(text);
    for (int k = 0; rc == 0 && k < c->n; k++) {
        c->nodes[k].is_master = is_master[k];
        c->nodes[k].master = master_of[k];
    }
    return rc;
}

static inline int rc_refresh(rc_cluster *c)
{
    return rc_refresh_from(c, -1);
}

/* True when the answer of node 'i' to 'cmd' (CLUSTER INFO, INFO replication)
   holds the text 'want'. */
static inline int rc_info_has(rc_cluster *c, int i, const char *cmd,
                              const char *want)
{
    redisReply *r = rs_cmd(&c->nodes[i].srv, cmd);
    int has = r != NULL && r->type == REDIS_REPLY_STRING &&
              strstr(r->str, want) != NULL;

    if (r != NULL)
        freeReplyObject(r);
    return has;
}

/*
 * Waits until every live node says cluster_state:ok, all live nodes agree
 * on the roles and on the master of every slot, every slot is served by a
 * live master, and every replica of a live master has its link up. Then
 * the map is read (rc_refresh). Returns 0, or -1 after 'timeout_ms'.
 */
static inline int rc_wait_stable(rc_cluster *c, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;
    static int owner[RC_SLOTS], first_owner[RC_SLOTS];
    const char *why = "";

    while (rs_mono_ms() < deadline) {
        int is_master[RC_MAX_NODES], master_of[RC_MAX_NODES];
        char sig[1024], first_sig[1024] = "";
        int ok = 1, first = -1;

        for (int i = 0; i < c->n && ok; i++) {
            char *text;

            if (c->nodes[i].dead)
                continue;
            if (!rc_info_has(c, i, "CLUSTER INFO", "cluster_state:ok")) {
                ok = 0;
                why = "a node's cluster_state is not ok";
                break;
            }
            if ((text = rc_nodes_text(c, i)) == NULL ||
                rc_parse_nodes(c, text, owner, is_master, master_of, sig,
                               sizeof(sig)) < 0) {
                free(text);
                ok = 0;
                why = "CLUSTER NODES unreadable";
                break;
            }
            free(text);
            if (first < 0) {
                first = i;
                memcpy(first_owner, owner, sizeof(owner));
                snprintf(first_sig, sizeof(first_sig), "%s", sig);
                for (int s = 0; s < RC_SLOTS && ok; s++)
                    if (owner[s] < 0 || c->nodes[owner[s]].dead) {
                        ok = 0;
                        why = "a slot has no live master";
                    }
                for (int k = 0; k < c->n && ok; k++)
                    if (!c->nodes[k].dead && !is_master[k] &&
                        master_of[k] >= 0 && !c->nodes[master_of[k]].dead &&
                        !rc_info_has(c, k, "INFO replication",
                                     "master_link_status:up")) {
                        ok = 0;
                        why = "a replica's link is down";
                    }
            } else if (strcmp(sig, first_sig) != 0 ||
                       memcmp(owner, first_owner, sizeof(owner)) != 0) {
                ok = 0;
                why = "the nodes do not agree yet";
            }
        }
        if (ok && first >= 0)
            return rc_refresh_from(c, first);
        rs_sleep_ms(50);
    }
    fprintf(stderr, "redis_cluster.h: not stable after %llu ms: %s\n",
            (unsigned long long)timeout_ms, why);
    return -1;
}

/* ---- Starting and stopping ----------------------------------------------- */

/* Stops every node and removes its directory. */
static inline void rc_stop(rc_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        rs_stop(&c->nodes[i].srv);
    c->n = 0;
}

/*
 * Starts 'masters' x (1 + 'replicas') nodes and makes them a cluster (see
 * the top). 'extra' is passed to every node, as in rs_start(). Returns 0, or
 * -1 after stopping what it started.
 */
static inline int rc_start(rc_cluster *c, int masters, int replicas,
                           const char *const *extra)
{
    char timeout[16], out[8192];
    const char *args[RS_MAX_EXTRA + 1];
    const char *cli[RC_MAX_NODES + 8];
    char endpoints[RC_MAX_NODES][32];
    int nargs = 0, ncli = 0;
    size_t ulen;

    memset(c, 0, sizeof(*c));
    c->n = masters * (1 + replicas);
    if (masters < 1 || replicas < 0 || c->n > RC_MAX_NODES ||
        (masters < 3 && !(masters == 1 && replicas == 0))) {
        fprintf(stderr, "redis_cluster.h: %d masters with %d replicas each "
                "is not supported\n", masters, replicas);
        c->n = 0;
        return -1;
    }
    snprintf(timeout, sizeof(timeout), "%d", RC_NODE_TIMEOUT_MS);
    args[nargs++] = "--cluster-node-timeout";
    args[nargs++] = timeout;
    args[nargs++] = "--cluster-require-full-coverage";
    args[nargs++] = "no";
    args[nargs++] = "--cluster-replica-validity-factor";
    args[nargs++] = "0";
    args[nargs++] = "--repl-diskless-sync-delay";
    args[nargs++] = "0";
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (nargs == RS_MAX_EXTRA) {
            fprintf(stderr, "redis_cluster.h: too many extra arguments\n");
            c->n = 0;
            return -1;
        }
        args[nargs++] = extra[i];
    }
    args[nargs] = NULL;
    for (int i = 0; i < c->n; i++) {
        c->nodes[i].master = -1;
        if (rs_start_cluster_node(&c->nodes[i].srv, args) < 0) {
            c->n = i + 1;
            rc_stop(c);
            return -1;
        }
    }
    ulen = (size_t)snprintf(c->url, sizeof(c->url), "redis+cluster://");
    for (int i = 0; i < c->n; i++)
        ulen += (size_t)snprintf(c->url + ulen, sizeof(c->url) - ulen,
                                 "%s127.0.0.1:%d", i ? "," : "",
                                 c->nodes[i].srv.port);
    if (masters == 1) {
        if (rs_ok(&c->nodes[0].srv, "CLUSTER ADDSLOTSRANGE 0 16383") < 0) {
            rc_stop(c);
            return -1;
        }
    } else {
        char nrep[16];

        snprintf(nrep, sizeof(nrep), "%d", replicas);
        cli[ncli++] = RC_CLI_BINARY;
        cli[ncli++] = "--cluster";
        cli[ncli++] = "create";
        for (int i = 0; i < c->n; i++) {
            snprintf(endpoints[i], sizeof(endpoints[i]), "127.0.0.1:%d",
                     c->nodes[i].srv.port);
            cli[ncli++] = endpoints[i];
        }
        cli[ncli++] = "--cluster-replicas";
        cli[ncli++] = nrep;
        cli[ncli++] = "--cluster-yes";
        cli[ncli] = NULL;
        if (rc_run(cli, out, sizeof(out), RC_CLI_TIMEOUT_MS) != 0) {
            fprintf(stderr, "redis_cluster.h: redis-cli --cluster create "
                    "failed:\n%s\n", out);
            rc_stop(c);
            return -1;
        }
    }
    if (rc_wait_stable(c, RC_READY_TIMEOUT_MS) < 0) {
        for (int i = 0; i < c->n; i++)
            rs_print_log(&c->nodes[i].srv);
        rc_stop(c);
        return -1;
    }
    return 0;
}

/* Kills node 'i' with SIGKILL, like a crash. */
static inline void rc_kill(rc_cluster *c, int i)
{
    rs_kill(&c->nodes[i].srv);
    c->nodes[i].dead = 1;
}

/*
 * Waits until a replica of the (dead) master 'i' says role:master. Returns
 * its index, or -1 after 'timeout_ms'.
 */
static inline int rc_wait_promoted(rc_cluster *c, int i, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;

    while (rs_mono_ms() < deadline) {
        for (int k = 0; k < c->n; k++)
            if (!c->nodes[k].dead && c->nodes[k].master == i &&
                rc_info_has(c, k, "INFO replication", "role:master"))
                return k;
        rs_sleep_ms(10);
    }
    return -1;
}

/* ---- Commands ------------------------------------------------------------ */

/*
 * Runs a command the way a cluster client does: at node 'at' (-1: the
 * first live master), then wherever MOVED sends it, or, after ASK, once at
 * the named node after ASKING. Returns the reply (the caller frees it),
 * which may be another error; NULL if a node could not be reached or the
 * redirections did not end. '*served' (if not NULL) gets the index of the
 * node that answered.
 */
static inline redisReply *rc_cmdargv(rc_cluster *c, int at, int argc,
                                     const char **argv, const size_t *lens,
                                     int *served)
{
    int i = at >= 0 ? at : rc_first_live(c, 1), asking = 0;

    for (int hop = 0; hop < 8 && i >= 0; hop++) {
        redisReply *r;
        const char *sp, *colon;
        int port;

        if (asking) {
            redisContext *ctx = rs_conn(&c->nodes[i].srv);
            void *v = NULL;

            if (ctx == NULL)
                return NULL;
            redisAppendCommand(ctx, "ASKING");
            redisAppendCommandArgv(ctx, argc, argv, lens);
            if (redisGetReply(ctx, &v) != REDIS_OK)
                return NULL;
            freeReplyObject(v);
            if (redisGetReply(ctx, &v) != REDIS_OK)
                return NULL;
            r = v;
        } else {
            r = rs_cmdargv(&c->nodes[i].srv, argc, argv, lens);
        }
        if (r == NULL)
            return NULL;
        asking = 0;
        if (r->type != REDIS_REPLY_ERROR ||
            (strncmp(r->str, "MOVED ", 6) != 0 &&
             strncmp(r->str, "ASK ", 4) != 0)) {
            if (served != NULL)
                *served = i;
            return r;
        }
        asking = r->str[0] == 'A';
        sp = strrchr(r->str, ' ');
        colon = strrchr(r->str, ':');
        port = colon != NULL && sp != NULL && colon > sp ? atoi(colon + 1) : -1;
        freeReplyObject(r);
        if ((i = rc_node_by_port(c, port)) < 0)
            fprintf(stderr, "redis_cluster.h: redirected to port %d, which "
                    "is not ours\n", port);
    }
    return NULL;
}

/* The server's CLUSTER KEYSLOT of a (binary) key, or -1. */
static inline int rc_keyslot(rc_cluster *c, const char *key, size_t len)
{
    const char *argv[] = {"CLUSTER", "KEYSLOT", key};
    size_t lens[] = {7, 7, len};
    int live = rc_first_live(c, 0);
    redisReply *r = live >= 0 ? rs_cmdargv(&c->nodes[live].srv, 3, argv, lens)
                              : NULL;
    int slot = -1;

    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        slot = (int)r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return slot;
}

/*
 * Moves 'nslots' slots from master 'from' to master 'to' with
 * `redis-cli --cluster reshard` (it takes 'from's lowest slots), then
 * rereads the map. Safe to call while other threads use the cluster.
 * Returns 0 or -1 (redis-cli's output on stderr).
 */
static inline int rc_reshard(rc_cluster *c, int from, int to, int nslots)
{
    char endpoint[32], n[16], out[16384];
    const char *cli[] = {RC_CLI_BINARY, "--cluster", "reshard", endpoint,
                         "--cluster-from", c->nodes[from].id, "--cluster-to",
                         c->nodes[to].id, "--cluster-slots", n,
                         "--cluster-yes", NULL};
    int rc;

    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d",
             c->nodes[from].srv.port);
    snprintf(n, sizeof(n), "%d", nslots);
    rc = rc_run(cli, out, sizeof(out), RC_CLI_TIMEOUT_MS);
    if (rc != 0) {
        fprintf(stderr, "redis_cluster.h: redis-cli --cluster reshard "
                "failed (%d):\n%s\n", rc, out);
        return -1;
    }
    return rc_wait_stable(c, RC_READY_TIMEOUT_MS);
}

#endif /* SLUICE_TEST_REDIS_CLUSTER_H */
