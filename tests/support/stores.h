/*
 * stores.h - opening the store a test names, and the names the library
 * gives its keys on a server ("PREFIX:{id}:SUFFIX", src/store/keys.c), so a
 * test can look at them with raw commands.
 */
#ifndef SLUICE_TEST_STORES_H
#define SLUICE_TEST_STORES_H

#include "sluice.h"

#include <stddef.h>

/*
 * Opens the store at 'base' with the URL query 'query' ("" for none) and
 * 'opts' (or NULL); a failure is a failed check, and then the program
 * exits (status 2): a test cannot go on without its store.
 */
sluice_store *test_store_open(const char *base, const char *query,
                              const sluice_store_opts *opts);

struct rs_server;

/*
 * Whether the native module loaded into 's' decides 'algo' (its glue is
 * built in): a SLUICE.HIT ... PEEK that writes nothing. When it answers
 * exactly the module's "no module glue" for 'algo', a note saying so is
 * printed, so a skipped run is never silent; any other answer but a
 * decision fails a check.
 */
int test_module_glue(struct rs_server *s, sluice_algo algo);

/* Checks that the module answered some of server store 'st's calls when
   'engine' is "module", and none otherwise (its stats' module_calls). */
void test_check_engine_used(sluice_store *st, const char *engine);

/* The URL query of a server store to compare decisions with: its scripts
   on the caller's clock (as the embedded store's), time to spare, and no
   refused cache answering in between. */
#define TEST_CALLER_QUERY "clock=caller&timeout=5000&refused_cache=off"

/* A new virtual clock at 'start_ms', set as 'opts's clock (the program
   exits if it cannot be made). */
sluice_vclock *test_vclock_opts(sluice_store_opts *opts, uint64_t start_ms);

/* A store on the server at 'url' with TEST_CALLER_QUERY, on a new virtual
   clock at 'start_ms', put in '*clock'. */
sluice_store *test_caller_store(sluice_vclock **clock, const char *url,
                                uint64_t start_ms);

/*
 * The server key of 'id' (of 'id_len' bytes) under 'prefix' ("sluice" for
 * the algorithms, "emq" for a queue) for 'suffix' (an algorithm's name,
 * "limiter", "meta"), NUL-terminated in 'out' (of 'cap' bytes; the program
 * exits if it does not fit). Returns its length.
 */
size_t test_key_of(char *out, size_t cap, const char *prefix, const char *id,
                   size_t id_len, const char *suffix);
/* The cluster slot of id 'id': every key of an id shares one (see
   tests/cluster/test_cluster_slots.c). */
unsigned test_slot_of_id(const char *id);
/* The cluster slot of the queue 'name' (of its limiter key, and meta). */
unsigned test_slot_of_queue(const char *name);

/* One hit on key "k" of 'limit' (the decision first filled with junk, so
   a field left unset shows): its code, and how long it took in '*ms'. */
int test_hit_timed(sluice_decision *d, sluice_store *st,
                   const sluice_limit *limit, uint64_t *ms);

#endif /* SLUICE_TEST_STORES_H */
