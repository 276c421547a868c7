/*
 * launch.c - the private redis-server the benchmark starts when --store
 * names none: on a free loopback port, in a temporary directory, with
 * --save '' --appendonly no, killed by PID however the program ends. It
 * loads the native module this build made (sluice.so), for the rows of
 * engine=module; the other sluice rows run the scripts (engine=lua).
 *
 * It is sluice_launcher (tests/support/server.h), which the tests start
 * their servers with too: so it is the build $SLUICE_TEST_SERVER names,
 * else redis-server, else valkey-server.
 */
#include "bench_server.h"
#include "server.h" /* sluice_launcher: rs_start(), rs_stop() */

static rs_server own;

/* Starts the server; its URL ("redis://127.0.0.1:PORT") into 'url'. */
int bench_server_start(char *url, size_t cap)
{
    if (rs_start(&own, rs_module_args()) < 0)
        return -1;
    snprintf(url, cap, "%s", own.url);
    return 0;
}

/* The program the server runs (its path). */
const char *bench_server_binary(void)
{
    return own.binary;
}

/* Stops the server and removes its directory. */
void bench_server_stop(void)
{
    rs_stop(&own);
}
