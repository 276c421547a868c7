/*
 * server.c - the table of the algorithms' server parts (algo.h): what a
 * store on a server and the server module need of each, beyond its pure
 * table. A file of its own, so that the embedded store's objects never
 * reach it.
 */
#include "algo/algo.h"

const sluice__algo_server *const sluice__algo_servers[SLUICE__ALGO_N] = {
#define SLUICE__ALGO_ENTRY(name, val, folder) \
    [SLUICE_##name] = &sluice__algo_server_##folder,
    SLUICE_ALGO_MAP(SLUICE__ALGO_ENTRY)
#undef SLUICE__ALGO_ENTRY
};
