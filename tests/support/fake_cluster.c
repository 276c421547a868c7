/*
 * fake_cluster.c - three fake nodes playing a Redis Cluster to the cluster
 * store (fake_cluster.h): the answers of each, by its mode.
 */
#include "fake_cluster.h"
#include "server.h" /* rs_mono_us() */
#include "test.h"
#include "valkey/valkey.h" /* sluice__key_slot, sluice__scripts */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

fc_node fc_nodes[NNODES];

static const char decision_reply[] = "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n";

const char *fc_script_sha(const char *text, size_t len)
{
    for (size_t i = 0; sluice__scripts[i] != NULL; i++)
        if (sluice__scripts[i]->len == len &&
            memcmp(sluice__scripts[i]->text, text, len) == 0)
            return sluice__scripts[i]->sha1;
    return FAKE_SHA;
}

/* EVALSHA on node 'n' for a key of 'slot', per the node's mode; 'asked'
   when the command came right after ASKING. */
static void answer_eval(fake_conn *c, fc_node *n, unsigned slot, int asked)
{
    int target = fc_port(n->target);

    switch (n->mode) {
    case EV_MOVED:
        n->moved_sent = 1;
        fake_replyf(c, "-MOVED %u 127.0.0.1:%d\r\n", slot, target);
        break;
    case EV_ASK:
        fake_replyf(c, "-ASK %u 127.0.0.1:%d\r\n", slot, target);
        break;
    case EV_TRYAGAIN:
        if (n->tryagain > 0) {
            n->tryagain--;
            fake_replyf(c, "-TRYAGAIN Multiple keys request during "
                        "rehashing of slot\r\n");
        } else {
            fake_replyf(c, "%s", decision_reply);
        }
        break;
    case EV_NOSCRIPT:
        n->mode = EV_DECIDE;
        fake_replyf(c, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
        break;
    case EV_IMPORTING:
        if (asked)
            fake_replyf(c, "%s", decision_reply);
        else
            fake_replyf(c, "-MOVED %u 127.0.0.1:%d\r\n", slot, target);
        break;
    case EV_SILENT:
        break;
    case EV_RAW:
        fake_replyf(c, "%s", n->raw);
        break;
    default:
        fake_replyf(c, "%s", decision_reply);
    }
}

/* The handler of every node (fake_node.h); 'payload' is its fc_node. */
static int answer(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    fc_node *n = payload;
    int *asked = fake_conn_state(c), was_asked = *asked;

    *asked = 0;
    if (fake_cmd_is(cmd, "CLUSTER SLOTS") && cmd->argc == 2 &&
        n->slots_silent) {
        /* a node that hangs: no answer */
    } else if (fake_cmd_is(cmd, "CLUSTER SLOTS") && cmd->argc == 2) {
        fake_replyf(c, "%s", n->moved_sent && n->slots_after[0]
                                 ? n->slots_after
                                 : n->slots);
        if (n->close_after_slots)
            fake_hang_up(c);
    } else if (fake_cmd_is(cmd, "SCRIPT")) {
        fake_replyf(c, "$40\r\n%s\r\n",
                    fc_script_sha(cmd->argc > 2 ? cmd->argv[2] : "",
                               cmd->argc > 2 ? cmd->lens[2] : 0));
    } else if (fake_cmd_is(cmd, "ASKING")) {
        *asked = 1;
        fake_replyf(c, "+OK\r\n");
    } else if (fake_cmd_is(cmd, "EVALSHA") && cmd->argc >= 4) {
        n->n_eval_asked += was_asked;
        answer_eval(c, n, sluice__key_slot(cmd->argv[3], cmd->lens[3]),
                    was_asked);
    } else {
        return 0; /* PING and DEL are scripted; the rest is unknown */
    }
    return 1;
}

/* ---- The nodes ----------------------------------------------------------- */

void fc_start(void)
{
    for (int attempt = 0; attempt < 200 && fc_nodes[NODE_B].fake == NULL;
         attempt++)
        fc_nodes[NODE_B].fake = fake_node_start(
            20000 + (int)((getpid() * 7919u + attempt * 104729u) % 14000u),
            answer, &fc_nodes[NODE_B]);
    for (int i = 0; i < NNODES; i++) {
        if (fc_nodes[i].fake == NULL)
            fc_nodes[i].fake = fake_node_start(0, answer, &fc_nodes[i]);
        if (fc_nodes[i].fake == NULL) {
            fprintf(stderr, "cannot listen on loopback\n");
            exit(2);
        }
        fake_node_on(fc_nodes[i].fake, "PING", "+PONG\r\n");
        fake_node_on(fc_nodes[i].fake, "DEL", ":1\r\n");
    }
}

void fc_stop(void)
{
    for (int i = 0; i < NNODES; i++) {
        fake_node_stop(fc_nodes[i].fake);
        fc_nodes[i].fake = NULL;
    }
    fake_log_clear();
}

int fc_port(int i)
{
    return fake_node_port(fc_nodes[i].fake);
}

void fc_slots_all(char *out, size_t cap, int i)
{
    snprintf(out, cap,
             "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "$40\r\n" FAKE_SHA "\r\n",
             fc_port(i));
}

void fc_reset(void)
{
    fake_lock();
    for (int i = 0; i < NNODES; i++) {
        fc_node *n = &fc_nodes[i];

        fc_slots_all(n->slots, sizeof(n->slots), NODE_A);
        n->slots_after[0] = '\0';
        n->close_after_slots = 0;
        n->slots_silent = 0;
        n->mode = EV_DECIDE;
        n->target = i;
        n->tryagain = 0;
        n->raw[0] = '\0';
        n->moved_sent = 0;
        n->n_eval_asked = 0;
    }
    fake_unlock();
    fake_log_clear();
}

void fc_mode(int i, int mode, int target)
{
    fake_lock();
    fc_nodes[i].mode = mode;
    fc_nodes[i].target = target;
    fake_unlock();
}

long fc_count(int i, const char *name)
{
    return fake_node_count(fc_nodes[i].fake, name);
}

int fc_asked_evals(int i)
{
    int n;

    fake_lock();
    n = fc_nodes[i].n_eval_asked;
    fake_unlock();
    return n;
}

/* ---- The store's side ---------------------------------------------------- */

sluice_store *fc_open(const char *seeds, const char *query)
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

sluice_store *fc_open_on(int i)
{
    char seed[32];

    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(i));
    return fc_open(seed, NULL);
}

int fc_timed_hit(sluice_decision *d, sluice_store *st, const char *key,
                 uint64_t *ms)
{
    static const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    uint64_t t0 = rs_mono_us();
    int rc;

    memset(d, 0x5a, sizeof(*d));
    rc = sluice_hit(d, st, &lim, key, strlen(key), 1);
    *ms = (rs_mono_us() - t0) / 1000;
    return rc;
}

int fc_is_decision(const sluice_decision *d)
{
    return d->allowed == 1 && d->remaining == 9 && d->retry_after_ms == 0 &&
           d->reset_after_ms == 60000 && d->limit == 10;
}

uint64_t fc_redirects(sluice_store *st)
{
    sluice_store_stats s;

    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_store_stats_get(&s, st));
    return s.redirects;
}
