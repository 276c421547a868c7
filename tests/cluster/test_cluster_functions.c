/*
 * test_cluster_functions.c - the Functions library on a Redis Cluster (the
 * cluster of the ctest run, cluster.h).
 *
 * sluice_functions_load() loads into one server; on a cluster store it
 * refuses (SLUICE_ENOTSUP) and says to load on each primary. Loaded so on
 * every master, FCALL sluice_hit on a limit's key is answered by the master
 * of the key's {ID} slot (another master answers MOVED: the key is
 * declared, so the cluster routes it), and it spends the same budget as
 * sluice_hit() through the cluster store.
 */
#include "cluster.h"
#include "stores.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

static rc_cluster cluster;

/* FUNCTION LOAD REPLACE (or, with 'text' NULL, FUNCTION DELETE) on every
   live master. */
static void load_everywhere(const char *text, size_t len)
{
    for (int i = 0; i < cluster.n; i++) {
        const char *load[] = {"FUNCTION", "LOAD", "REPLACE", text};
        size_t lens[] = {8, 4, 7, len};
        redisReply *r;

        if (!cluster.nodes[i].is_master || cluster.nodes[i].dead)
            continue;
        if (text != NULL)
            r = rs_cmdargv(&cluster.nodes[i].srv, 4, load, lens);
        else
            r = rs_cmd(&cluster.nodes[i].srv, "FUNCTION DELETE sluice");
        CHECK(r != NULL && r->type != REDIS_REPLY_ERROR);
        if (r != NULL)
            freeReplyObject(r);
    }
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
        CHECK_OK(sluice_reset(st, &l, id, strlen(id)));
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
    size_t len;
    const char *text = sluice_functions_text(&len);

    if (rc_shared_begin(&cluster, "test_cluster_functions") < 0)
        return 1;
    if (sluice_store_open(&st, cluster.url, NULL) != SLUICE_OK) {
        fprintf(stderr, "test_cluster_functions: %s\n", sluice_last_error());
        rc_shared_close(&cluster);
        return 1;
    }
    CHECK_RC(sluice_functions_load(st), SLUICE_ENOTSUP);
    CHECK(strstr(sluice_last_error(), "each primary") != NULL);
    CHECK(rc_refresh(&cluster) == 0);
    load_everywhere(text, len);
    test_routed(st);
    load_everywhere(NULL, 0);
    sluice_store_free(st);
    rc_shared_close(&cluster);
    return test_summary("test_cluster_functions");
}
