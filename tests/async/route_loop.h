/*
 * route_loop.h - the smallest poll() loop that drives one sluice_async
 * handle, for the routing tests (test_async_cluster.c,
 * test_async_sentinel.c): the hooks record which descriptors to watch and
 * when the timer is due; rl_run() polls until a condition holds.
 *
 * Each callback the tests give counts itself in an rl_tally, so a test can
 * say that every call was answered exactly once.
 */
#ifndef SLUICE_TEST_ROUTE_LOOP_H
#define SLUICE_TEST_ROUTE_LOOP_H

#include "server.h" /* rs_mono_ms */
#include "sluice.h"
#include "sluice/async.h"

#include <poll.h>
#include <stdint.h>
#include <string.h>

#define RL_MAX_FDS 64

typedef struct rl_loop {
    struct pollfd fds[RL_MAX_FDS];
    int nfds;
    long long timer_at_ms; /* monotonic; -1: none */
    int overflow;          /* more descriptors than RL_MAX_FDS */
} rl_loop;

static void rl_watch(void *data, int fd, int events)
{
    rl_loop *l = data;
    int i;

    for (i = 0; i < l->nfds && l->fds[i].fd != fd; i++)
        ;
    if (events == 0) {
        if (i < l->nfds)
            l->fds[i] = l->fds[--l->nfds];
        return;
    }
    if (i == l->nfds) {
        if (l->nfds == RL_MAX_FDS) {
            l->overflow = 1;
            return;
        }
        l->nfds++;
    }
    l->fds[i].fd = fd;
    l->fds[i].events = (short)(((events & SLUICE_ASYNC_READ) ? POLLIN : 0) |
                               ((events & SLUICE_ASYNC_WRITE) ? POLLOUT : 0));
}

static void rl_timer(void *data, long long ms)
{
    rl_loop *l = data;

    l->timer_at_ms = ms < 0 ? -1 : (long long)rs_mono_ms() + ms;
}

static void rl_init(rl_loop *l, sluice_async_hooks *hooks)
{
    memset(l, 0, sizeof(*l));
    l->timer_at_ms = -1;
    memset(hooks, 0, sizeof(*hooks));
    hooks->watch = rl_watch;
    hooks->timer = rl_timer;
    hooks->loop_data = l;
}

/* One turn of the loop: a poll of at most 'max_wait_ms', then every ready
   descriptor, then the timer if it is due. */
static void rl_turn(sluice_async *a, rl_loop *l, long long max_wait_ms)
{
    struct pollfd ready[RL_MAX_FDS];
    long long wait = max_wait_ms, now = (long long)rs_mono_ms();
    int n = l->nfds;

    if (l->timer_at_ms >= 0 && l->timer_at_ms - now < wait)
        wait = l->timer_at_ms > now ? l->timer_at_ms - now : 0;
    memcpy(ready, l->fds, (size_t)n * sizeof(ready[0]));
    if (poll(ready, (nfds_t)n, (int)wait) > 0)
        for (int i = 0; i < n; i++) {
            int ev = 0;

            if (ready[i].revents & (POLLIN | POLLERR | POLLHUP))
                ev |= SLUICE_ASYNC_READ;
            if (ready[i].revents & (POLLOUT | POLLERR | POLLHUP))
                ev |= SLUICE_ASYNC_WRITE;
            if (ev != 0)
                sluice_async_on_fd(a, ready[i].fd, ev);
        }
    if (l->timer_at_ms >= 0 && (long long)rs_mono_ms() >= l->timer_at_ms) {
        l->timer_at_ms = -1;
        sluice_async_on_timer(a);
    }
}

/* Turns the loop until no call is pending, or 'limit_ms'; 0 or -1. */
static int rl_drain(sluice_async *a, rl_loop *l, uint64_t limit_ms)
{
    uint64_t end = rs_mono_ms() + limit_ms;

    while (sluice_async_pending(a) > 0) {
        if (rs_mono_ms() >= end)
            return -1;
        rl_turn(a, l, 50);
    }
    return 0;
}

/* ---- Tallies ------------------------------------------------------------ */

/* One call's answer, kept by its callback. */
typedef struct rl_answer {
    int calls; /* how many times the callback ran: must end at 1 */
    int err;
    sluice_decision d;
    char msg[200];
} rl_answer;

static void rl_on_decision(sluice_async *a, int err, const sluice_decision *d,
                           void *user)
{
    rl_answer *ans = user;

    (void)a;
    ans->calls++;
    ans->err = err;
    if (d != NULL)
        ans->d = *d;
    if (err != 0) {
        strncpy(ans->msg, sluice_last_error(), sizeof(ans->msg) - 1);
        ans->msg[sizeof(ans->msg) - 1] = '\0';
    }
}

#endif /* SLUICE_TEST_ROUTE_LOOP_H */
