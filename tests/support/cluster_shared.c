/*
 * cluster_shared.c - the cluster that the tests of a ctest run share
 * (cluster.h): the state file the fixture writes (tests/cluster/fixture.c)
 * and the tests read, and how a test attaches to the nodes it finds there.
 */
#include "cluster.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- The shared cluster -------------------------------------------------- */

/*
 * The state file, one line each:
 *   sluice-cluster KEEPER-PID
 *   node PORT BUS-PORT PID DIR
 */
int rc_save(const rc_cluster *c, const char *path)
{
    char tmp[4096];
    FILE *f;
    int ok;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if ((f = fopen(tmp, "w")) == NULL) {
        fprintf(stderr, "cluster.c: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "sluice-cluster %ld\n", (long)c->keeper);
    for (int i = 0; i < c->n; i++)
        fprintf(f, "node %d %d %ld %s\n", c->nodes[i].srv.port,
                c->nodes[i].srv.bus_port, (long)c->nodes[i].srv.pid,
                c->nodes[i].srv.dir);
    ok = fflush(f) == 0 && !ferror(f);
    ok &= fclose(f) == 0;
    /* Renamed into place: a reader sees the whole file or none. */
    if (!ok || rename(tmp, path) < 0) {
        fprintf(stderr, "cluster.c: cannot write %s\n", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}

/*
 * The state ('R', 'S', 'T', 'Z', ...) of process 'pid' if its parent is
 * 'parent', else 0 (gone, or not the node: its PID was taken again).
 */
static char child_state(pid_t pid, pid_t parent)
{
    char path[64], buf[512], state = 0;
    const char *close_paren;
    long ppid = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(buf, sizeof(buf), f) != NULL &&
        (close_paren = strrchr(buf, ')')) != NULL &&
        sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2)
        state = 0;
    fclose(f);
    return ppid == (long)parent ? state : 0;
}

int rc_read_state(rc_cluster *c, const char *path)
{
    char line[512];
    long keeper = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        fprintf(stderr, "cluster.c: %s: %s\n", path, strerror(errno));
        return -1;
    }
    memset(c, 0, sizeof(*c));
    if (fgets(line, sizeof(line), f) == NULL ||
        sscanf(line, "sluice-cluster %ld", &keeper) != 1)
        keeper = 0;
    c->keeper = (pid_t)keeper;
    while (keeper > 0 && c->n < RC_MAX_NODES &&
           fgets(line, sizeof(line), f) != NULL) {
        rs_server *s = &c->nodes[c->n].srv;
        long pid;

        if (sscanf(line, "node %d %d %ld %255s", &s->port, &s->bus_port,
                   &pid, s->dir) != 4)
            break;
        s->pid = (pid_t)pid;
        s->owner = c->keeper;
        snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", s->port);
        c->nodes[c->n++].master = -1;
    }
    fclose(f);
    if (keeper <= 0 || c->n == 0) {
        fprintf(stderr, "cluster.c: %s is not a cluster's state\n", path);
        return -1;
    }
    return 0;
}

int rc_attach(rc_cluster *c, const char *path)
{
    if (rc_read_state(c, path) < 0)
        return -1;
    for (int i = 0; i < c->n; i++) {
        rs_server *s = &c->nodes[i].srv;
        char state = child_state(s->pid, c->keeper);

        if (state == 0 || state == 'Z') {
            c->nodes[i].dead = 1;
            s->pid = 0;
        } else if (state == 'T') {
            kill(s->pid, SIGCONT);
        }
    }
    rc_make_url(c);
    return rc_wait_stable(c, RC_READY_TIMEOUT_MS);
}

void rc_force_stop(rc_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        rs_server *s = &c->nodes[i].srv;

        if (child_state(s->pid, c->keeper) != 0)
            kill(s->pid, SIGKILL);
        s->pid = 0;
        c->nodes[i].dead = 1;
        if (s->dir[0] != '\0')
            rs_remove_tree(s->dir);
    }
}

int rc_shared_open(rc_cluster *c)
{
    const char *path = getenv(RC_SHARED_ENV);

    if (path != NULL && path[0] != '\0')
        return rc_attach(c, path);
    return rc_start(c, 3, 1, rs_module_args()); /* as the fixture's */
}

int rc_shared_begin(rc_cluster *c, const char *name)
{
    uint64_t t0 = rs_mono_ms();

    if (rc_shared_open(c) < 0) {
        fprintf(stderr, "%s: no cluster\n", name);
        return -1;
    }
    printf("%s: cluster %s ready in %llu ms\n", name, c->url,
           (unsigned long long)(rs_mono_ms() - t0));
    fflush(stdout);
    return 0;
}

void rc_shared_close(rc_cluster *c)
{
    if (c->keeper == getpid()) {
        rc_stop(c);
        return;
    }
    for (int i = 0; i < c->n; i++) {
        if (c->nodes[i].srv.ctx != NULL)
            redisFree(c->nodes[i].srv.ctx);
        c->nodes[i].srv.ctx = NULL;
    }
    c->n = 0;
}
