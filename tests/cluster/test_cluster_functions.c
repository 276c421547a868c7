/*
 * test_cluster_functions.c - the Functions library on a Redis Cluster (the
 * cluster of the ctest run, cluster.h).
 *
 * sluice_functions_load() on a cluster store loads the library into every
 * master (FCALL sluice_version answers on each). Then FCALL sluice_hit on a limit's key is answered by the master
 * of the key's {ID} slot (another master answers MOVED: the key is
 * declared, so the cluster routes it), and it spends the same budget as
 * sluice_hit() through the cluster store.
 */
#include "cluster.h"
#include "stores.h"
#include "test.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static rc_cluster cluster;

/* Every live master answers FCALL sluice_version with the built-in one
   (with 'deleted', FUNCTION DELETE sluice there instead). Answers how many
   masters there are. */
static size_t check_masters(bool deleted)
{
    size_t masters = 0;

    for (int i = 0; i < cluster.n; i++) {
        redisReply *r;

        if (!cluster.nodes[i].is_master || cluster.nodes[i].dead)
            continue;
        masters++;
        if (deleted) {
            CHECK(rs_ok(&cluster.nodes[i].srv, "FUNCTION DELETE sluice") == 0);
            continue;
        }
        r = rs_cmd(&cluster.nodes[i].srv, "FCALL sluice_version 0");
        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, sluice_functions_version()) == 0);
        if (r != NULL)
            freeReplyObject(r);
    }
    return masters;
}

static void test_routed(sluice_store *st)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 4, 600000);
    int moved = 0;

    for (int k = 0; k < 24; k++) {
        char id[16], key[96];
        size_t len;
        int owner, other;

        snprintf(id, sizeof(id), "fnid%d", k);
        len = test_key_of(key, sizeof(key), "sluice", id, strlen(id),
                          "sliding-log");
        owner = cluster.owner[rc_keyslot(&cluster, key, len)];
        test_context("id %s key %s owner %d", id, key, owner);
        if (!CHECK(owner >= 0))
            continue;
        CHECK_RESET(sluice_reset(st, &l, id, strlen(id)));
        for (uint64_t i = 1; i <= 5; i++) {
            sluice_decision d;

            if (i % 2 == 0) {
                CHECK_OK(sluice_hit(&d, st, &l, id, strlen(id), 1));
            } else {
                redisReply *r = rs_cmd(&cluster.nodes[owner].srv,
                                       "FCALL sluice_hit 1 %s sliding-log 4 "
                                       "600000", key);

                if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY &&
                           r->elements == 4)) {
                    if (r != NULL)
                        freeReplyObject(r);
                    continue;
                }
                d.allowed = (int)r->element[0]->integer;
                d.remaining = (uint64_t)r->element[1]->integer;
                freeReplyObject(r);
            }
            CHECK_EQ_U64(d.allowed, i <= 4);
            CHECK_EQ_U64(d.remaining, i <= 4 ? 4 - i : 0);
        }
        for (other = 0; other < cluster.n; other++)
            if (cluster.nodes[other].is_master && !cluster.nodes[other].dead &&
                other != owner)
                break;
        if (other < cluster.n) {
            redisReply *r = rs_cmd(&cluster.nodes[other].srv,
                                   "FCALL sluice_peek 1 %s sliding-log 4 "
                                   "600000", key);

            moved += r != NULL && r->type == REDIS_REPLY_ERROR &&
                     strncmp(r->str, "MOVED", 5) == 0;
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    test_context(NULL);
    CHECK(moved == 24);
    printf("  FCALL on the key's master shares sluice_hit()'s budget; "
           "another master answers MOVED (%d/24)\n", moved);
}

int main(void)
{
    sluice_store *st;
    size_t servers = 0;

    if (rc_shared_begin(&cluster, "test_cluster_functions") < 0)
        return 1;
    if (sluice_store_open(&st, cluster.url, NULL) != SLUICE_OK) {
        fprintf(stderr, "test_cluster_functions: %s\n", sluice_last_error());
        rc_shared_close(&cluster);
        return 1;
    }
    CHECK(rc_refresh(&cluster) == 0);
    CHECK_OK(sluice_functions_load(st, &servers));
    CHECK_EQ_U64(servers, check_masters(false));
    printf("  loaded into %zu masters\n", servers);
    test_routed(st);
    check_masters(true);
    sluice_store_free(st);
    rc_shared_close(&cluster);
    return test_summary("test_cluster_functions");
}
