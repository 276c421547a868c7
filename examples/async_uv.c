/* async_uv.c - sluice in a libuv loop: one key hit 12 times, 10 a second. */
#include <sluice.h>
#include <sluice/adapters/libuv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int answered; /* the loop stops at the twelfth answer */

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user) {
    int hit = (int)(intptr_t)user;
    (void)a;
    if (++answered == 12) uv_stop(uv_default_loop());
    if (err != SLUICE_OK) printf("hit %2d: %s\n", hit, sluice_last_error());
    else if (d->allowed) printf("hit %2d: allowed, %llu left\n", hit,
                                (unsigned long long)d->remaining);
    else printf("hit %2d: refused, retry in %llu ms\n", hit,
                (unsigned long long)d->retry_after_ms);
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : getenv("SLUICE_STORE"); /* NULL: embedded */
    sluice_limit limit = SLUICE_LIMIT(SLUICE_FIXED, 10, 1000);
    uv_loop_t *loop = uv_default_loop();
    sluice_store *store;
    sluice_async *a;
    if (sluice_store_open(&store, url, NULL) != SLUICE_OK ||
        sluice_async_uv_new(&a, store, loop) != SLUICE_OK)
        return fprintf(stderr, "async_uv: %s\n", sluice_last_error()), 1;
    for (intptr_t i = 1; i <= 12; i++)
        sluice_async_hit(a, &limit, "user:42", 7, 1, on_decision, (void *)i);
    uv_run(loop, UV_RUN_DEFAULT); /* until the twelfth answer */
    sluice_async_free(a);
    uv_run(loop, UV_RUN_DEFAULT); /* the adapter's close callbacks run */
    sluice_store_free(store);
    return 0;
}
