/*
 * fixture.c - the one Redis Cluster that the cluster tests of a ctest run
 * share: CTest's fixture "cluster" (tests/CMakeLists.txt) runs
 *
 *   sluice_cluster_fixture start STATE   (FIXTURES_SETUP)
 *       forks a keeper, which starts six nodes, three masters with a
 *       replica each (cluster.h: rc_start()), writes them to the file
 *       STATE (rc_save(): ports, PIDs, directories) and keeps them. Returns
 *       0 once the cluster is up, 1 if it could not start.
 *   sluice_cluster_fixture stop STATE    (FIXTURES_CLEANUP)
 *       asks the keeper to stop (SIGTERM) and waits until it has stopped
 *       the nodes and removed STATE; if it does not in time, kills the
 *       nodes by PID itself. CTest runs it whether the tests passed or not.
 *
 * The tests find STATE in $SLUICE_TEST_CLUSTER (rc_shared_open()).
 *
 * The keeper is the nodes' parent, so they die with it however it ends
 * (PR_SET_PDEATHSIG, server.h). It is also the watchdog: the process that
 * ran 'start' is ctest itself, and when ctest is gone (killed, say, before
 * it could run 'stop') the keeper stops the nodes, removes STATE and
 * exits. So no node outlives the run. The keeper writes to STATE.log, never
 * to ctest's pipes, which ctest waits to see closed before the setup test
 * counts as finished.
 */
#define _GNU_SOURCE /* syscall() */
#include "cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long 'stop' waits for the keeper before it kills the nodes itself. */
#define STOP_WAIT_MS 20000
/* How often the keeper looks at ctest and at its nodes. */
#define WATCH_MS 200

static volatile sig_atomic_t stop_asked;

static void ask_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* ---- The keeper ---------------------------------------------------------- */

/*
 * A descriptor that becomes readable when process 'pid' ends (Linux's
 * pidfd), or -1 where there is none (watched_gone() polls instead).
 */
static int watch_process(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Waits up to WATCH_MS; true once process 'pid' has ended. */
static int watched_gone(pid_t pid, int pidfd)
{
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};

        return poll(&p, 1, WATCH_MS) > 0 && (p.revents & POLLIN);
    }
    rs_sleep_ms(WATCH_MS);
    return kill(pid, 0) < 0 && errno == ESRCH;
}

/* Reaps the nodes a test killed, so their PIDs are never signalled again. */
static void reap_killed(rc_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        rs_server *s = &c->nodes[i].srv;

        if (s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            c->nodes[i].dead = 1;
        }
    }
}

/*
 * The keeper's life: start the cluster, say so on 'ready_fd' ("K", or
 * nothing on failure), then keep it until asked to stop or until 'ctest'
 * is gone. Returns the exit status.
 */
static int keep(const char *state, pid_t ctest, int ready_fd)
{
    struct sigaction sa;
    rc_cluster c;
    int pidfd = watch_process(ctest);

    /* Every node loads the native module when the build made one: the
       cluster tests' stores (engine=auto) then decide by it. */
    if (rc_start(&c, 3, 1, rs_module_args()) < 0)
        return 1;
    if (rc_save(&c, state) < 0) {
        rc_stop(&c);
        return 1;
    }
    /* After rc_start(): these replace server.c's handlers, which would
       kill the nodes at once and leave STATE behind. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = ask_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    printf("keeper %ld: cluster %s, watching ctest (pid %ld)\n",
           (long)getpid(), c.url, (long)ctest);
    fflush(stdout);
    if (write(ready_fd, "K", 1) != 1)
        stop_asked = 1;
    close(ready_fd);
    while (!stop_asked && !watched_gone(ctest, pidfd))
        reap_killed(&c);
    printf("keeper: %s; stopping the nodes\n",
           stop_asked ? "asked to stop" : "ctest is gone");
    reap_killed(&c);
    for (int i = 0; i < c.n; i++)
        if (c.nodes[i].srv.pid > 0)
            kill(c.nodes[i].srv.pid, SIGCONT); /* in case a test paused it */
    rc_stop(&c);
    unlink(state);
    if (pidfd >= 0)
        close(pidfd);
    return 0;
}

/* The keeper's output: 'log', and nothing from ctest's descriptors. */
static void detach_output(const char *log)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_RDONLY);

    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        close(null);
    }
}

/* ---- start and stop ------------------------------------------------------ */

/* Prints the file at 'path' to stderr (the keeper's log). */
static void print_file(const char *path)
{
    char line[512];
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

static int start(const char *state)
{
    pid_t ctest = getppid(), keeper;
    char log[4096], ready = 0;
    int fds[2];

    snprintf(log, sizeof(log), "%s.log", state);
    if (pipe(fds) < 0) {
        perror("pipe");
        return 1;
    }
    fflush(NULL);
    if ((keeper = fork()) < 0) {
        perror("fork");
        return 1;
    }
    if (keeper == 0) {
        close(fds[0]);
        detach_output(log);
        exit(keep(state, ctest, fds[1]));
    }
    close(fds[1]);
    while (read(fds[0], &ready, 1) < 0 && errno == EINTR)
        ;
    close(fds[0]);
    if (ready != 'K') {
        fprintf(stderr, "sluice_cluster_fixture: the cluster did not start; "
                "the keeper's log (%s):\n", log);
        print_file(log);
        waitpid(keeper, NULL, 0);
        return 1;
    }
    printf("cluster kept by pid %ld for ctest (pid %ld); nodes in %s\n",
           (long)keeper, (long)ctest, state);
    return 0;
}

/* True if 'pid' runs this very program (a keeper, not a PID taken again). */
static int is_keeper(pid_t pid)
{
    char path[64], self[4096], other[4096];
    ssize_t a, b;

    snprintf(path, sizeof(path), "/proc/%ld/exe", (long)pid);
    a = readlink("/proc/self/exe", self, sizeof(self) - 1);
    b = readlink(path, other, sizeof(other) - 1);
    return a > 0 && a == b && memcmp(self, other, (size_t)a) == 0;
}

static int stop(const char *state)
{
    rc_cluster c;
    uint64_t deadline = rs_mono_ms() + STOP_WAIT_MS;

    if (access(state, F_OK) != 0) {
        printf("no cluster to stop (%s is not there)\n", state);
        return 0;
    }
    if (rc_read_state(&c, state) < 0)
        return 1;
    if (is_keeper(c.keeper) && kill(c.keeper, SIGTERM) == 0)
        while (access(state, F_OK) == 0 && rs_mono_ms() < deadline)
            rs_sleep_ms(50);
    if (access(state, F_OK) != 0) {
        printf("cluster stopped by its keeper (pid %ld)\n", (long)c.keeper);
        return 0;
    }
    fprintf(stderr, "sluice_cluster_fixture: the keeper (pid %ld) did not "
            "stop the cluster; killing its nodes\n", (long)c.keeper);
    rc_force_stop(&c);
    unlink(state);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "start") == 0)
        return start(argv[2]);
    if (argc == 3 && strcmp(argv[1], "stop") == 0)
        return stop(argv[2]);
    fprintf(stderr, "usage: sluice_cluster_fixture start|stop STATE-FILE\n");
    return 2;
}
