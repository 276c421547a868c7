/*
 * cluster.h - a Redis Cluster for tests: started by a program of its own, or
 * shared by every cluster test of a ctest run.
 *
 * Built on server.h: every node is an rs_server started with
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
 *   rc_shared_open(&c)          the cluster of the ctest run (see below), or
 *                               one of the program's own when run by hand;
 *                               rc_shared_close(&c) when done.
 *   rc_refresh(&c)              reread the roles, ids and the slot map
 *                               (c.owner[slot], c.nodes[i].master) from
 *                               CLUSTER NODES.
 *   rc_cmdargv(&c, -1, ...)     a raw command that follows MOVED and ASK
 *                               like a cluster client; 'at' picks the first
 *                               node to ask (-1: the first live master).
 *   rc_keyslot(&c, key, len)    the server's CLUSTER KEYSLOT of a key.
 *   rc_reshard(&c, from, to, n) `redis-cli --cluster reshard`: moves n slots.
 *   rc_start_tls(&c, 3, 1, "yes", NULL)  the same cluster over TLS only.
 *   rc_kill(&c, i)              SIGKILL node i (a crash); rc_wait_promoted()
 *                               waits for one of its replicas to take over.
 *   rc_stop(&c)                 stop every node and remove its directory.
 *
 * redis-cli is the build's (rs_binary(RS_PROGRAM_CLI), $SLUICE_TEST_CLI).
 *
 * Nodes run with a short --cluster-node-timeout (RC_NODE_TIMEOUT_MS) so a
 * failover takes seconds, --cluster-require-full-coverage no so the masters
 * that are still up keep serving their own slots while one master is down
 * (the default would answer CLUSTERDOWN for every slot until a replica is
 * promoted), --cluster-replica-validity-factor 0 so a replica may always
 * take over, however slow the machine, and --repl-diskless-sync-delay 0 so
 * a replica's first sync starts at once (not 5 s later).
 *
 * The shared cluster. The ctest fixture (tests/cluster/fixture.c) starts one
 * cluster for the whole run and writes its nodes to a state file
 * (rc_save()); the path is in $SLUICE_TEST_CLUSTER for the tests that need
 * it, which attach to it (rc_attach()): they may kill, pause and reshard its
 * nodes, but never stop them, since they did not start them (only the
 * process that started a server stops it, see server.h).
 *
 * Functions print their failures to stderr and return -1 (or NULL); the
 * caller decides whether that fails the test. Call them from the main
 * thread: a node dies with the thread that started it (PR_SET_PDEATHSIG),
 * and rc_cmdargv() uses the helper connections of server.h, which are not
 * shared between threads.
 */
#ifndef SLUICE_TEST_CLUSTER_H
#define SLUICE_TEST_CLUSTER_H

#include "server.h"

#define RC_MAX_NODES 8
#define RC_SLOTS 16384
#define RC_NODE_TIMEOUT_MS 1000
#define RC_READY_TIMEOUT_MS 30000
#define RC_CLI_TIMEOUT_MS 120000
/* The environment variable that names the shared cluster's state file. */
#define RC_SHARED_ENV "SLUICE_TEST_CLUSTER"

typedef struct rc_node {
    rs_server srv;
    char id[41];   /* the node's cluster id; "" until rc_refresh() */
    int is_master; /* as of the last rc_refresh() */
    int master;    /* a replica's master (an index), else -1 */
    int dead;      /* killed by rc_kill(), or found dead by rc_attach() */
} rc_node;

typedef struct rc_cluster {
    int n;
    rc_node nodes[RC_MAX_NODES];
    /* The master (an index) serving each slot as of the last rc_refresh(),
       or -1. */
    int owner[RC_SLOTS];
    /* "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,..." with every live
       node. */
    char url[RC_MAX_NODES * 24 + 32];
    /* The process that started the nodes: this one, or the fixture's. */
    pid_t keeper;
    /* Started by rc_start_tls(): every node speaks TLS only (RS_TLS). */
    int tls;
} rc_cluster;

/* ---- Nodes --------------------------------------------------------------- */

/* The index of the node listening on 'port', or -1. */
int rc_node_by_port(const rc_cluster *c, int port);
/* The index of the node with cluster id 'id' (of 'len' bytes), or -1. */
int rc_node_by_id(const rc_cluster *c, const char *id, size_t len);
/* The first node that was not killed (a master, if 'masters_only'), or -1. */
int rc_first_live(const rc_cluster *c, int masters_only);
/* True when the answer of node 'i' to 'cmd' (CLUSTER INFO, INFO
   replication) holds the text 'want'. */
int rc_info_has(rc_cluster *c, int i, const char *cmd, const char *want);

/* ---- The map ------------------------------------------------------------- */

/* Rewrites c->url: every live node, as seeds. */
void rc_make_url(rc_cluster *c);
/* Rereads roles, ids and the map from the first live node; 0 or -1. */
int rc_refresh(rc_cluster *c);
/*
 * Waits until every live node says cluster_state:ok, all live nodes agree
 * on the roles and on the master of every slot, every slot is served by a
 * live master, and every replica of a live master has its link up. Then
 * the map is read (rc_refresh). Returns 0, or -1 after 'timeout_ms'.
 */
int rc_wait_stable(rc_cluster *c, uint64_t timeout_ms);

/* ---- Starting and stopping ----------------------------------------------- */

/*
 * Starts 'masters' x (1 + 'replicas') nodes and makes them a cluster (see
 * the top). 'extra' is passed to every node, as in rs_start(). Returns 0, or
 * -1 after stopping what it started.
 */
int rc_start(rc_cluster *c, int masters, int replicas,
             const char *const *extra);
/*
 * rc_start() over TLS: every node is started with
 * rs_start_tls_cluster_node() (TLS only on its client port, --tls-cluster
 * yes, --tls-replication yes, --tls-auth-clients 'auth_clients', NULL
 * "no"), and `redis-cli --cluster create` (and rc_reshard()) runs with --tls
 * and the run's CA, client certificate and key. c.url is
 * "rediss+cluster://127.0.0.1:P1,..."; the caller adds the library's TLS
 * options. The harness's own commands (rc_cmdargv(), rc_refresh()...) go
 * through each node's Unix socket (see rs_start_tls()). Not for the shared
 * cluster: its state file keeps plain nodes only.
 */
int rc_start_tls(rc_cluster *c, int masters, int replicas,
                 const char *auth_clients, const char *const *extra);
/* Stops every node and removes its directory. */
void rc_stop(rc_cluster *c);
/* Kills node 'i' with SIGKILL, like a crash. */
void rc_kill(rc_cluster *c, int i);
/*
 * Waits until a replica of the (dead) master 'i' says role:master. Returns
 * its index, or -1 after 'timeout_ms'.
 */
int rc_wait_promoted(rc_cluster *c, int i, uint64_t timeout_ms);

/* ---- The shared cluster -------------------------------------------------- */

/* Writes the nodes of 'c' (started by this process) to 'path'; 0 or -1. */
int rc_save(const rc_cluster *c, const char *path);
/*
 * Reads the state file at 'path' into 'c' (nodes, PIDs, directories, the
 * keeper), without a word to any node. Returns 0 or -1.
 */
int rc_read_state(rc_cluster *c, const char *path);
/*
 * For a fixture whose keeper does not answer: kills (SIGKILL) every node of
 * 'c' that is still the keeper's child, and removes every node's
 * directory.
 */
void rc_force_stop(rc_cluster *c);
/*
 * Reads the nodes a fixture wrote to 'path': a node whose process is gone
 * is dead, a node left stopped (SIGSTOP, by a test that crashed) is
 * resumed. Then waits until the cluster is stable (rc_wait_stable()).
 * Returns 0 or -1.
 */
int rc_attach(rc_cluster *c, const char *path);
/*
 * The shared cluster named by $SLUICE_TEST_CLUSTER (rc_attach()) or, when
 * that is not set (a test run by hand), a cluster of 3 masters with a
 * replica each, started for this program. Returns 0 or -1.
 */
int rc_shared_open(rc_cluster *c);
/*
 * For a test's main(): rc_shared_open(), and a line that starts with
 * 'name' to say where the cluster is and how long it took (or why there
 * is none). Returns 0 or -1.
 */
int rc_shared_begin(rc_cluster *c, const char *name);
/* Stops the cluster if this program started it; else only lets it go. */
void rc_shared_close(rc_cluster *c);

/* ---- Commands ------------------------------------------------------------ */

/*
 * Runs a command the way a cluster client does: at node 'at' (-1: the
 * first live master), then wherever MOVED sends it, or, after ASK, once at
 * the named node after ASKING. Returns the reply (the caller frees it),
 * which may be another error; NULL if a node could not be reached or the
 * redirections did not end. '*served' (if not NULL) gets the index of the
 * node that answered.
 */
redisReply *rc_cmdargv(rc_cluster *c, int at, int argc, const char **argv,
                       const size_t *lens, int *served);
/* The server's CLUSTER KEYSLOT of a (binary) key, or -1. */
int rc_keyslot(rc_cluster *c, const char *key, size_t len);
/*
 * Moves 'nslots' slots from master 'from' to master 'to' with
 * `redis-cli --cluster reshard` (it takes 'from's lowest slots), then
 * rereads the map. Safe to call while other threads use the cluster.
 * Returns 0 or -1 (redis-cli's output on stderr).
 */
int rc_reshard(rc_cluster *c, int from, int to, int nslots);

/* The live masters (indexes into 'out', room for RC_MAX_NODES), in the
   order of the lowest slot each serves; returns how many. */
int rc_masters_by_slot(const rc_cluster *c, int *out);
/*
 * The integer answer of command 'cmd' on one key (GET, EXISTS, ZCARD...),
 * sent like rc_cmdargv(): a number as text is read, nil is 0; -1 if there
 * is no such answer.
 */
long long rc_key_int(rc_cluster *c, const char *cmd, const char *key);
/* The same for a key of 'key_len' bytes (binary-safe). */
long long rc_key_intn(rc_cluster *c, const char *cmd, const char *key,
                      size_t key_len);
/* HSET 'key' (of 'key_len' bytes) 'field' 'value', sent like
   rc_cmdargv(); 0 when it answered a number (the fields it added), else
   -1. */
int rc_hset(rc_cluster *c, const char *key, size_t key_len, const char *field,
            const char *value);
/* FLUSHALL on every live master; returns how many failed (0: all did). */
int rc_flush(rc_cluster *c);

/* ---- Moving a slot by hand ----------------------------------------------- */

/* CLUSTER SETSLOT IMPORTING at 'to', then MIGRATING at 'from'; 0 or -1. */
int rc_slot_open(rc_cluster *c, int slot, int from, int to);
/* MIGRATE of 'n' (at most 10) keys ('keys[i]' of 'lens[i]' bytes) from
   node 'from' to node 'to' in one atomic step; 0 or -1 (the error on
   stderr). */
int rc_migrate(rc_cluster *c, int from, int to, const char *const *keys,
               const size_t *lens, size_t n);
/* CLUSTER SETSLOT NODE 'to' at 'to', then at 'from', then at the other
   live masters; 0 or -1. */
int rc_slot_close(rc_cluster *c, int slot, int from, int to);

#endif /* SLUICE_TEST_CLUSTER_H */
