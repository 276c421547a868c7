/*
 * cluster.c - the Redis Cluster of cluster.h: nodes started with server.c,
 * plain or TLS, made a cluster by redis-cli (rs_run()), watched through
 * CLUSTER NODES; and the state file by which the tests of a ctest run
 * share one cluster.
 */
#include "cluster.h"
#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Nodes --------------------------------------------------------------- */

int rc_node_by_port(const rc_cluster *c, int port)
{
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i].srv.port == port)
            return i;
    return -1;
}

int rc_node_by_id(const rc_cluster *c, const char *id, size_t len)
{
    for (int i = 0; i < c->n; i++)
        if (len == 40 && memcmp(c->nodes[i].id, id, 40) == 0)
            return i;
    return -1;
}

int rc_first_live(const rc_cluster *c, int masters_only)
{
    for (int i = 0; i < c->n; i++)
        if (!c->nodes[i].dead && (!masters_only || c->nodes[i].is_master))
            return i;
    return -1;
}

int rc_info_has(rc_cluster *c, int i, const char *cmd, const char *want)
{
    redisReply *r = rs_cmd(&c->nodes[i].srv, cmd);
    int has = r != NULL && r->type == REDIS_REPLY_STRING &&
              strstr(r->str, want) != NULL;

    if (r != NULL)
        freeReplyObject(r);
    return has;
}

/* ---- Running redis-cli --------------------------------------------------- */

/*
 * The start of every `redis-cli --cluster` command line, into 'cli': the
 * CLI of the build under test (rs_binary()) and, for a TLS cluster, --tls
 * with the run's CA, client certificate and key. Returns the count, or -1.
 */
static int cli_start(const rc_cluster *c, const char **cli)
{
    const rs_certs *certs;
    int n = 0;

    if ((cli[n++] = rs_binary(RS_PROGRAM_CLI)) == NULL)
        return -1;
    if (c->tls) {
        if ((certs = rs_certs_get()) == NULL)
            return -1;
        cli[n++] = "--tls";
        cli[n++] = "--cacert";
        cli[n++] = certs->ca_cert;
        cli[n++] = "--cert";
        cli[n++] = certs->client_cert;
        cli[n++] = "--key";
        cli[n++] = certs->client_key;
    }
    return n;
}

/* ---- The map ------------------------------------------------------------- */

/* What one node's CLUSTER NODES says, as node indexes. */
typedef struct nodes_view {
    int *owner; /* RC_SLOTS: each slot's master, or -1 */
    int is_master[RC_MAX_NODES];
    int master_of[RC_MAX_NODES];
    char roles[RC_MAX_NODES][24];
} nodes_view;

/* Reads the slot ranges of a master's line ('field[8..nf)') into 'owner'. */
static int parse_slots(int *owner, int idx, char **field, int nf)
{
    for (int f = 8; f < nf; f++) {
        char *dash;
        long lo, hi;

        if (field[f][0] == '[') /* an open slot ("[5-<-id]") */
            continue;
        lo = strtol(field[f], &dash, 10);
        hi = *dash == '-' ? strtol(dash + 1, NULL, 10) : lo;
        if (lo < 0 || hi >= RC_SLOTS || lo > hi) {
            fprintf(stderr, "cluster.c: bad slot range '%s'\n", field[f]);
            return -1;
        }
        for (long s = lo; s <= hi; s++)
            owner[s] = idx;
    }
    return 0;
}

/*
 * Parses one line of CLUSTER NODES ('buf', changed in place): the node's
 * id, role and slots. Returns -1 on a line it cannot read or a node it
 * does not know.
 */
static int parse_line(rc_cluster *c, char *buf, nodes_view *v)
{
    char *field[64], *save = NULL, *tok, *at, *colon;
    int nf = 0, idx, port;

    for (tok = strtok_r(buf, " ", &save); tok != NULL && nf < 64;
         tok = strtok_r(NULL, " ", &save))
        field[nf++] = tok;
    if (nf == 0)
        return 0;
    if (nf < 8 || strlen(field[0]) != 40) {
        fprintf(stderr, "cluster.c: bad CLUSTER NODES line\n");
        return -1;
    }
    /* "ip:port@cport[,hostname]" */
    if ((at = strchr(field[1], '@')) != NULL)
        *at = '\0';
    colon = strrchr(field[1], ':');
    port = colon ? atoi(colon + 1) : -1;
    if ((idx = rc_node_by_port(c, port)) < 0) {
        fprintf(stderr, "cluster.c: CLUSTER NODES names port %d, which is "
                "not ours\n", port);
        return -1;
    }
    memcpy(c->nodes[idx].id, field[0], 40);
    c->nodes[idx].id[40] = '\0';
    v->is_master[idx] = strstr(field[2], "master") != NULL;
    snprintf(v->roles[idx], sizeof(v->roles[idx]), "%d:%s:%.8s ", idx,
             v->is_master[idx] ? "M" : "S", field[3]);
    return parse_slots(v->owner, idx, field, nf);
}

/* Once every id is known: each replica's master (its line's 4th field). */
static void link_replicas(const rc_cluster *c, const char *text,
                          nodes_view *v)
{
    const char *line = text;

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
            v->master_of[self] = m;
        line += len + (eol ? 1 : 0);
    }
}

/*
 * Parses one node's CLUSTER NODES text into 'v': each slot's master (open
 * slots are skipped), and per node its role and master. 'sig' gets a
 * summary that two nodes agree on iff they agree on the roles and the map
 * (the slots are in 'v->owner'). Returns -1 on a line it cannot read or a
 * node it does not know.
 */
static int parse_nodes(rc_cluster *c, const char *text, nodes_view *v,
                       char *sig, size_t sig_cap)
{
    const char *line = text;
    size_t sig_len = 0;

    for (int s = 0; s < RC_SLOTS; s++)
        v->owner[s] = -1;
    for (int i = 0; i < c->n; i++) {
        v->is_master[i] = 0;
        v->master_of[i] = -1;
        v->roles[i][0] = '\0';
    }
    if (sig_cap > 0)
        sig[0] = '\0';
    while (*line != '\0') {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[4096];

        if (len >= sizeof(buf)) {
            fprintf(stderr, "cluster.c: CLUSTER NODES line too long\n");
            return -1;
        }
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (len > 0 && buf[len - 1] == '\r')
            buf[len - 1] = '\0';
        line += len + (eol ? 1 : 0);
        if (parse_line(c, buf, v) < 0)
            return -1;
    }
    /* The summary, in node order (each node lists the others in its own
       order). */
    for (int i = 0; i < c->n; i++)
        if (sig_len + sizeof(v->roles[i]) < sig_cap)
            sig_len += (size_t)snprintf(sig + sig_len, sig_cap - sig_len,
                                        "%s", v->roles[i]);
    link_replicas(c, text, v);
    return 0;
}

/* CLUSTER NODES of node 'i' as a string (the caller frees it), or NULL. */
static char *nodes_text(rc_cluster *c, int i)
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
static int refresh_from(rc_cluster *c, int from)
{
    nodes_view v = {.owner = c->owner};
    int i = from >= 0 ? from : rc_first_live(c, 0);
    char *text, sig[1024];
    int rc;

    if (i < 0 || (text = nodes_text(c, i)) == NULL)
        return -1;
    rc = parse_nodes(c, text, &v, sig, sizeof(sig));
    free(text);
    for (int k = 0; rc == 0 && k < c->n; k++) {
        c->nodes[k].is_master = v.is_master[k];
        c->nodes[k].master = v.master_of[k];
    }
    return rc;
}

int rc_refresh(rc_cluster *c)
{
    return refresh_from(c, -1);
}

/*
 * The first live node's view, checked alone: every slot has a live master,
 * and every replica of a live master has its link up. NULL if so, else why
 * not.
 */
static const char *first_view_unstable(rc_cluster *c, const nodes_view *v)
{
    for (int s = 0; s < RC_SLOTS; s++)
        if (v->owner[s] < 0 || c->nodes[v->owner[s]].dead)
            return "a slot has no live master";
    for (int k = 0; k < c->n; k++)
        if (!c->nodes[k].dead && !v->is_master[k] && v->master_of[k] >= 0 &&
            !c->nodes[v->master_of[k]].dead &&
            !rc_info_has(c, k, "INFO replication", "master_link_status:up"))
            return "a replica's link is down";
    return NULL;
}

/*
 * One look at every live node: NULL when they all say cluster_state:ok and
 * agree with the first ('*first' gets its index), else why not.
 */
static const char *look_stable(rc_cluster *c, int *first)
{
    static int owner[RC_SLOTS], first_owner[RC_SLOTS];
    char sig[1024], first_sig[1024] = "";

    *first = -1;
    for (int i = 0; i < c->n; i++) {
        nodes_view v = {.owner = owner};
        const char *why;
        char *text;
        int bad;

        if (c->nodes[i].dead)
            continue;
        if (!rc_info_has(c, i, "CLUSTER INFO", "cluster_state:ok"))
            return "a node's cluster_state is not ok";
        text = nodes_text(c, i);
        bad = text == NULL || parse_nodes(c, text, &v, sig, sizeof(sig)) < 0;
        free(text);
        if (bad)
            return "CLUSTER NODES unreadable";
        if (*first >= 0) {
            if (strcmp(sig, first_sig) != 0 ||
                memcmp(owner, first_owner, sizeof(owner)) != 0)
                return "the nodes do not agree yet";
            continue;
        }
        *first = i;
        memcpy(first_owner, owner, sizeof(owner));
        snprintf(first_sig, sizeof(first_sig), "%s", sig);
        if ((why = first_view_unstable(c, &v)) != NULL)
            return why;
    }
    return *first >= 0 ? NULL : "no live node";
}

int rc_wait_stable(rc_cluster *c, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;
    const char *why = "";

    while (rs_mono_ms() < deadline) {
        int first;

        if ((why = look_stable(c, &first)) == NULL)
            return refresh_from(c, first);
        rs_sleep_ms(50);
    }
    fprintf(stderr, "cluster.c: not stable after %llu ms: %s\n",
            (unsigned long long)timeout_ms, why);
    return -1;
}

/* ---- Starting and stopping ----------------------------------------------- */

void rc_stop(rc_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        rs_stop(&c->nodes[i].srv);
    c->n = 0;
}

void rc_make_url(rc_cluster *c)
{
    size_t ulen = (size_t)snprintf(c->url, sizeof(c->url), "%s",
                                   c->tls ? "rediss+cluster://"
                                          : "redis+cluster://");
    const char *sep = "";

    for (int i = 0; i < c->n; i++) {
        if (c->nodes[i].dead)
            continue;
        ulen += (size_t)snprintf(c->url + ulen, sizeof(c->url) - ulen,
                                 "%s127.0.0.1:%d", sep, c->nodes[i].srv.port);
        sep = ",";
    }
}

/*
 * Every node's arguments into 'args' (room for RS_MAX_EXTRA + 1): the
 * cluster options of the top of cluster.h, then 'extra'. Returns -1 if
 * they do not fit.
 */
static int node_args(const char **args, const char *const *extra)
{
    static char timeout[16];
    int nargs = 0;

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
            fprintf(stderr, "cluster.c: too many extra arguments\n");
            return -1;
        }
        args[nargs++] = extra[i];
    }
    args[nargs] = NULL;
    return 0;
}

/*
 * Makes the started nodes a cluster: one master is given every slot by
 * hand; more are joined by `redis-cli --cluster create`. Returns 0 or -1.
 */
static int create_cluster(rc_cluster *c, int masters, int replicas)
{
    char endpoints[RC_MAX_NODES][32], nrep[16], out[8192];
    const char *cli[RC_MAX_NODES + 16];
    int ncli;

    if (masters == 1)
        return rs_ok(&c->nodes[0].srv, "CLUSTER ADDSLOTSRANGE 0 16383");
    snprintf(nrep, sizeof(nrep), "%d", replicas);
    if ((ncli = cli_start(c, cli)) < 0)
        return -1;
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
    if (rs_run(cli, out, sizeof(out), RC_CLI_TIMEOUT_MS) != 0) {
        fprintf(stderr, "cluster.c: redis-cli --cluster create failed:\n%s\n",
                out);
        return -1;
    }
    return 0;
}

/*
 * rc_start() and rc_start_tls(): 'tls_auth' is NULL for a plain cluster,
 * else the nodes' --tls-auth-clients.
 */
static int start_cluster(rc_cluster *c, int masters, int replicas,
                         const char *tls_auth, const char *const *extra)
{
    const char *args[RS_MAX_EXTRA + 1];

    memset(c, 0, sizeof(*c));
    c->keeper = getpid();
    c->tls = tls_auth != NULL;
    c->n = masters * (1 + replicas);
    if (masters < 1 || replicas < 0 || c->n > RC_MAX_NODES ||
        (masters < 3 && !(masters == 1 && replicas == 0))) {
        fprintf(stderr, "cluster.c: %d masters with %d replicas each is not "
                "supported\n", masters, replicas);
        c->n = 0;
        return -1;
    }
    if (node_args(args, extra) < 0) {
        c->n = 0;
        return -1;
    }
    for (int i = 0; i < c->n; i++) {
        c->nodes[i].master = -1;
        if ((c->tls ? rs_start_tls_cluster_node(&c->nodes[i].srv, tls_auth,
                                                args)
                    : rs_start_cluster_node(&c->nodes[i].srv, args)) < 0) {
            c->n = i + 1;
            rc_stop(c);
            return -1;
        }
    }
    rc_make_url(c);
    if (create_cluster(c, masters, replicas) < 0 ||
        rc_wait_stable(c, RC_READY_TIMEOUT_MS) < 0) {
        for (int i = 0; i < c->n; i++)
            rs_print_log(&c->nodes[i].srv);
        rc_stop(c);
        return -1;
    }
    return 0;
}

int rc_start(rc_cluster *c, int masters, int replicas,
             const char *const *extra)
{
    return start_cluster(c, masters, replicas, NULL, extra);
}

int rc_start_tls(rc_cluster *c, int masters, int replicas,
                 const char *auth_clients, const char *const *extra)
{
    return start_cluster(c, masters, replicas,
                         auth_clients != NULL ? auth_clients : "no", extra);
}

void rc_kill(rc_cluster *c, int i)
{
    rs_kill(&c->nodes[i].srv);
    c->nodes[i].dead = 1;
}

int rc_wait_promoted(rc_cluster *c, int i, uint64_t timeout_ms)
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

int rc_reshard(rc_cluster *c, int from, int to, int nslots)
{
    char endpoint[32], n[16], out[16384];
    const char *tail[] = {"--cluster", "reshard", endpoint, "--cluster-from",
                          c->nodes[from].id, "--cluster-to", c->nodes[to].id,
                          "--cluster-slots", n, "--cluster-yes", NULL};
    const char *cli[32];
    int rc, ncli;

    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d",
             c->nodes[from].srv.port);
    snprintf(n, sizeof(n), "%d", nslots);
    if ((ncli = cli_start(c, cli)) < 0)
        return -1;
    for (int i = 0; i <= 10; i++)
        cli[ncli++] = tail[i]; /* with its NULL */
    rc = rs_run(cli, out, sizeof(out), RC_CLI_TIMEOUT_MS);
    if (rc != 0) {
        fprintf(stderr, "cluster.c: redis-cli --cluster reshard failed "
                "(%d):\n%s\n", rc, out);
        return -1;
    }
    return rc_wait_stable(c, RC_READY_TIMEOUT_MS);
}
