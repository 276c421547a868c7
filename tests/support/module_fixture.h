/*
 * module_fixture.h - a private redis-server with sluice.so loaded, and the
 * same request sent two ways: as SLUICE.HIT / SLUICE.HITMANY (the module),
 * and as the algorithm's script (EVALSHA of src/algo/NAME/NAME.lua, as the
 * Valkey store sends it), so a test can hold the module's four figures and
 * what it leaves on the key against the script's.
 */
#ifndef SLUICE_TEST_MODULE_FIXTURE_H
#define SLUICE_TEST_MODULE_FIXTURE_H

#include "server.h"

#include "sluice.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * Starts 's' with the module loaded (rs_module_path()) and every
 * algorithm's script loaded, plus the arguments of 'extra' (NULL-terminated,
 * or NULL). Returns 0; -1 with a message (also when the build has no
 * module).
 */
int mf_start(rs_server *s, const char *const *extra);

/* One request: what SLUICE.HIT takes. 'now_ms' < 0: no NOW (the server's
   clock); 'burst' 0: no BURST. */
typedef struct mf_request {
    sluice_algo algo;
    uint64_t max, window_ms, cost, burst;
    bool peek;
    long long now_ms;
} mf_request;

/* A reply of four figures; 'foreign' when the key held something else
   (the module's WRONGTYPE, the script's -1), 'error' for any other error
   (its text in 'message'). */
typedef struct mf_answer {
    long long fig[4];
    bool foreign;
    bool error;
    char message[200];
} mf_answer;

/* SLUICE.HIT 'key' ... on 's'. Returns 0, or -1 when the server could not
   be reached or answered something else than four integers or an error. */
int mf_module_hit(rs_server *s, const char *key, const mf_request *rq,
                  mf_answer *out);
/* The same request through the algorithm's script (ARGV as prelude.lua
   says, the token 'token'). */
int mf_script_hit(rs_server *s, const char *key, const mf_request *rq,
                  const char *token, mf_answer *out);

/*
 * SLUICE.HITMANY with 'n' keys and costs, and the same through the script
 * (one call, the keys in turn): 'out' gets 4n figures each (allowed -1 for
 * a foreign key). Returns 0, or -1 (an error reply's text in 'message').
 */
int mf_module_hitmany(rs_server *s, const char *const *keys,
                      const uint64_t *costs, int n, const mf_request *rq,
                      long long *out, char *message, size_t cap);
int mf_script_hitmany(rs_server *s, const char *const *keys,
                      const uint64_t *costs, int n, const mf_request *rq,
                      const char *token, long long *out, char *message,
                      size_t cap);

/* Reads the reply 'r' of n requests into 'fig' (4n integers): 0; 1 for an
   error reply, its text in 'message'; -1 for no reply or another shape. */
int mf_read_figures(redisReply *r, long long *fig, int n, char *message,
                    size_t cap);

/* What a key holds, for comparing two keys: TYPE, a dump of its value
   (GET, HGETALL sorted or ZRANGE ... WITHSCORES, flattened; a byte that is
   not printable as \xHH, so binary values compare whole), PTTL. A key
   that expired while it was being read is read as absent ("none", "", -2). */
typedef struct mf_state {
    char type[16];
    char value[8192];
    long long pttl;
} mf_state;

int mf_state_of(rs_server *s, const char *key, mf_state *out);

/* Whether two keys read one after the other hold the same: same type and
   value, PTTLs within 'margin_ms'; or one is gone and the other had at most
   'margin_ms' left (both expire in the moment between the two reads). */
bool mf_state_same(const mf_state *a, const mf_state *b, long long margin_ms);

#endif /* SLUICE_TEST_MODULE_FIXTURE_H */
