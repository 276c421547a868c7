/*
 * fake_cluster.h - three fake cluster nodes, A, B and C (fake_node.h),
 * scripted to play a Redis Cluster to the cluster store, for the tests of
 * how it follows MOVED, ASK and TRYAGAIN and reads CLUSTER SLOTS. Each
 * answers
 *
 *   CLUSTER SLOTS  a reply the test chose (raw RESP, so it may be
 *                  malformed), and another one once the node has sent a
 *                  MOVED;
 *   SCRIPT LOAD    the script's SHA1 (the library's, built in);
 *   ASKING         +OK, and the connection's next command is "asked";
 *   EVALSHA        per the node's mode: a decision (FAKE_DECISION_REPLY),
 *                  -MOVED or -ASK to another fake node, -TRYAGAIN a number
 *                  of times, -NOSCRIPT once, a decision only after ASKING
 *                  (as an importing node does; else -MOVED back), nothing
 *                  at all, or raw bytes;
 *   PING, DEL      +PONG, :1.
 *
 * The test sets a node's fields under fake_lock(); the nodes count what
 * they receive (fc_count(), the fakes' log).
 */
#ifndef SLUICE_TEST_FAKE_CLUSTER_H
#define SLUICE_TEST_FAKE_CLUSTER_H

#include "fake_node.h"
#include "sluice.h"

#include <stddef.h>
#include <stdint.h>

/* A call must come back within its timeout plus this much slack. */
#define CALL_BOUND_MS 2000
#define MAX_SENDS 5 /* MAX_SENDS, src/valkey/cluster.c */
#define FAKE_SHA "0123456789abcdef0123456789abcdef01234567"

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

typedef struct fc_node {
    fake_node *fake;
    /* Behaviour, set by the test. */
    char slots[2048];       /* the CLUSTER SLOTS reply */
    char slots_after[2048]; /* ... once a MOVED was sent, if not empty */
    int close_after_slots;  /* hang up right after CLUSTER SLOTS */
    int slots_silent;       /* never answer CLUSTER SLOTS */
    int mode;
    int target; /* a node index, for MOVED and ASK */
    int tryagain;
    char raw[512];
    /* What happened. */
    int moved_sent;
    int n_eval_asked; /* EVALSHA right after ASKING */
} fc_node;

extern fc_node fc_nodes[NNODES];

/* Starts the three nodes, B on a port below 34464 (so that its port +
   65536 has five digits); exits if it cannot. */
/* The SHA1 that SCRIPT LOAD answers for 'text', as a server would compute
   it: the library's own, built in, for its scripts; FAKE_SHA for others. */
const char *fc_script_sha(const char *text, size_t len);

void fc_start(void);
void fc_stop(void);
/* Resets every node to: all slots on A, EVALSHA decides; clears the log. */
void fc_reset(void);
/* Sets node 'i's EVALSHA behaviour. */
void fc_mode(int i, int mode, int target);
/* A CLUSTER SLOTS reply: every slot served by node 'i'. */
void fc_slots_all(char *out, size_t cap, int i);
int fc_port(int i);
/* The commands named 'name' that node 'i' received (fake_node_count()). */
long fc_count(int i, const char *name);
/* Node 'i's EVALSHA commands that came right after ASKING. */
int fc_asked_evals(int i);

/* ---- The store's side ---------------------------------------------------- */

/* A cluster store with 'seeds' and the URL query 'query' (NULL: one second
   timeouts). */
sluice_store *fc_open(const char *seeds, const char *query);
/* A store whose one seed is fake node 'i'. */
sluice_store *fc_open_on(int i);
/* One timed hit on 'key' (fixed, 10 per minute); '*ms' is how long it
   took. The decision is poisoned first. */
int fc_timed_hit(sluice_decision *d, sluice_store *st, const char *key,
                 uint64_t *ms);
/* The decision every fake node answers. */
int fc_is_decision(const sluice_decision *d);
/* The store's count of redirects followed. */
uint64_t fc_redirects(sluice_store *st);

#endif /* SLUICE_TEST_FAKE_CLUSTER_H */
