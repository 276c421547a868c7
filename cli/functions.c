/*
 * functions.c - 'sluice functions': prints the Functions library (Redis 7+ /
 * Valkey), or loads it into a server with FUNCTION LOAD REPLACE.
 */
#include "cli.h"

#include <string.h>

const char cli_functions_help[] =
    "Usage: sluice functions\n"
    "       sluice functions --load --store URL | --store-file PATH\n"
    "\n"
    "Prints the Functions library (Redis 7+ or Valkey: FUNCTION LOAD), the\n"
    "same algorithms as the server store's scripts, writing the same keys,\n"
    "so that clients of any language share budgets with sluice:\n"
    "\n"
    "  sluice functions | redis-cli -x FUNCTION LOAD REPLACE\n"
    "\n"
    "With --load, loads it into the server at URL (valkey://..., or every\n"
    "master of a cluster, valkey+cluster://...), replacing an older\n"
    "version, and prints the version loaded (--store-file PATH: the URL\n"
    "from the first line of PATH, mode 600; without either, $SLUICE_STORE).\n"
    "Then:\n"
    "\n"
    "  FCALL sluice_hit  1 KEY ALGO MAX WINDOW_MS [COST [BURST [NOW]]]\n"
    "  FCALL sluice_peek 1 KEY ALGO MAX WINDOW_MS [COST [BURST [NOW]]]\n"
    "      -> allowed (1/0), remaining, retry_after_ms, reset_after_ms\n"
    "  FCALL sluice_reset 1 KEY          -> 1 if KEY was there, else 0\n"
    "  FCALL sluice_version 0            -> the library's version\n"
    "\n"
    "KEY is the limit's whole key, as the server store names it:\n"
    "sluice:{ID}:ALGO (e.g. sluice:{user42}:fixed). ALGO: @ALGOS@.\n"
    "COST defaults to 1, BURST to 0 (MAX); NOW is the caller's clock in ms\n"
    "(default: the server's, TIME).\n"
    "\n"
    "Exit status: 0 printed or loaded; 2 usage error, or a server without\n"
    "FUNCTION (older than Redis 7); 3 the server cannot be reached or\n"
    "refused the library (an ACL without +function, ...).\n";

/* Writes the library to stdout. */
static int functions_print(void)
{
    size_t len;
    const char *text = sluice_functions_text(&len);

    if (fwrite(text, 1, len, stdout) != len) {
        cli_error("functions: cannot write the library");
        return CLI_EXIT_RUNTIME;
    }
    return CLI_EXIT_OK;
}

/* FUNCTION LOAD REPLACE into the server at 'url'. */
static int functions_load(const char *url)
{
    sluice_store *store = NULL;
    size_t servers = 0;
    int err, status;

    if ((status = cli_store_open(&store, "functions", url, "FUNCTION LOAD "
                                 "needs a server: valkey://...", NULL)) != 0)
        return status;
    if ((err = sluice_functions_load(store, &servers)) < 0) {
        status = cli_lib_error("functions", "functions --load", err);
    } else {
        printf("loaded library sluice %s into %zu server%s\n",
               sluice_functions_version(), servers, servers == 1 ? "" : "s");
        status = CLI_EXIT_OK;
    }
    sluice_store_free(store);
    return status;
}

int cli_functions(int argc, char **argv)
{
    const char *url = NULL, *file = NULL;
    bool load = false;
    int st;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--load") == 0) {
            load = true;
        } else if (strcmp(argv[i], "--store") == 0) {
            if (i + 1 == argc)
                return cli_usage_error("functions", "functions: --store "
                                       "needs a URL");
            url = argv[++i];
        } else if (strcmp(argv[i], "--store-file") == 0) {
            if (i + 1 == argc)
                return cli_usage_error("functions", "functions: "
                                       "--store-file needs a PATH");
            file = argv[++i];
        } else {
            return cli_usage_error("functions", "functions: unexpected "
                                   "argument '%s'", cli_shown(argv[i]));
        }
    }
    if (!load && (url != NULL || file != NULL))
        return cli_usage_error("functions", "functions: %s is only for "
                               "--load", url != NULL ? "--store"
                                                     : "--store-file");
    if (!load)
        return functions_print();
    if ((st = cli_store_url(&url, "functions", file)) != 0)
        return st;
    if (url == NULL || cli_url_is_embedded(url))
        return cli_usage_error("functions", "functions: --load needs "
                               "--store valkey://HOST[:PORT] (the embedded "
                               "store has no server)");
    return functions_load(url);
}
