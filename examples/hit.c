#include <sluice.h>
#include <stdio.h>

int main(void)
{
    sluice_store *store;
    sluice_limit limit = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 100, 60 * 1000); /* 100/min */
    sluice_decision d;
    int err;

    /* NULL or "mem://": in-process; "valkey://host:6379": shared. */
    if ((err = sluice_store_open(&store, NULL, NULL)) < 0) {
        fprintf(stderr, "%s\n", sluice_last_error());
        return 1;
    }
    err = sluice_hit(&d, store, &limit, "user:42", 7, 1);
    if (err < 0)
        fprintf(stderr, "%s: %s\n", sluice_err_name(err), sluice_last_error());
    else if (d.allowed)
        printf("admitted, %llu left\n", (unsigned long long)d.remaining);
    else
        printf("wait %llu ms\n", (unsigned long long)d.retry_after_ms);
    sluice_store_free(store);
    return 0;
}
