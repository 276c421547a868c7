/*
 * work_run.c - the commands 'sluice work --exec CMD' runs for its jobs, up
 * to --concurrency at once, and the signals that stop the worker.
 *
 * The worker waits for a command with a time-out, so that it can renew the
 * job's lease meanwhile: it polls a pidfd (pidfd_open(), Linux 5.3 and
 * later) that becomes readable when the command ends, or, where there is
 * none, looks again every RUN_RECHECK_MS with waitpid(WNOHANG).
 */
#define _DEFAULT_SOURCE /* syscall() */
#include "work.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_RECHECK_MS 20u   /* waitpid(WNOHANG) without a pidfd */
#define RUN_STOP_WAIT_MS 5000u /* SIGTERM, then SIGKILL this much later */

/* ---- Signals --------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t signals_seen;
/* The process group of the command in each slot, or 0: what a second
   signal passes SIGTERM to. */
static volatile sig_atomic_t groups[CLI_WORK_CONCURRENCY_MAX];
static struct sigaction old_int, old_term;

static void on_stop_signal(int sig)
{
    int saved = errno;

    stop_signal = sig;
    if (++signals_seen > 1)
        for (size_t i = 0; i < CLI_WORK_CONCURRENCY_MAX; i++)
            if (groups[i] > 0)
                kill(-(pid_t)groups[i], SIGTERM);
    errno = saved;
}

void cli_work_signals_on(void)
{
    struct sigaction sa;

    /* No SA_RESTART: a signal cuts a wait short. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

void cli_work_signals_off(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

bool cli_work_stopping(void)
{
    return stop_signal != 0;
}

/* ---- Starting ---------------------------------------------------------------- */

/* A pidfd for 'pid', or -1 where the kernel (or the headers) have none. */
static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/*
 * The payload of 'job' in an unlinked temporary file, read from its start
 * (rather than a pipe, so a command that does not read it cannot block the
 * worker); NULL when it cannot be (reported).
 */
static FILE *payload_file(const sluice_job *job)
{
    FILE *in = tmpfile();

    if (in == NULL ||
        fwrite(job->payload, 1, job->payload_len, in) != job->payload_len ||
        fflush(in) != 0 || fseek(in, 0, SEEK_SET) != 0) {
        cli_error("work: cannot hold the payload in a temporary file: %s",
                  strerror(errno));
        if (in != NULL)
            fclose(in);
        return NULL;
    }
    return in;
}

/* In the child: CMD's input, output and environment, then CMD. */
static void exec_child(FILE *in, const char *cmd, const char *queue,
                       const sluice_job *job)
{
    char id[24], attempt[24];

    snprintf(id, sizeof(id), "%llu", (unsigned long long)job->id);
    snprintf(attempt, sizeof(attempt), "%llu",
             (unsigned long long)job->attempt);
    setpgid(0, 0);
    if (dup2(fileno(in), STDIN_FILENO) < 0 ||
        dup2(STDERR_FILENO, STDOUT_FILENO) < 0 ||
        setenv("SLUICE_QUEUE", queue, 1) != 0 ||
        setenv("SLUICE_JOB_ID", id, 1) != 0 ||
        setenv("SLUICE_ATTEMPT", attempt, 1) != 0)
        _exit(126);
    fclose(in);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
}

int cli_run_start(cli_run *runs, size_t slot, const char *cmd,
                  const char *queue, size_t queue_len, const sluice_job *job)
{
    cli_run *run = &runs[slot];
    FILE *in = payload_file(job);
    pid_t pid;

    if (in == NULL)
        return -1;
    fflush(stdout);
    fflush(stderr);
    if ((pid = fork()) < 0) {
        cli_error("work: cannot start a process: %s", strerror(errno));
        fclose(in);
        return -1;
    }
    if (pid == 0)
        exec_child(in, cmd, queue, job);
    setpgid(pid, pid); /* also here, so the group exists before a signal */
    fclose(in);
    *run = (cli_run){.pid = pid, .pidfd = pidfd_of(pid), .queue = queue,
                     .queue_len = queue_len, .id = job->id,
                     .attempt = job->attempt, .lease = job->lease};
    groups[slot] = pid;
    return 0;
}

/* ---- Waiting ----------------------------------------------------------------- */

void cli_run_wait(const cli_run *runs, size_t n, uint64_t timeout_ms)
{
    struct pollfd fds[CLI_WORK_CONCURRENCY_MAX];
    nfds_t nfds = 0;

    for (size_t i = 0; i < n && i < CLI_WORK_CONCURRENCY_MAX; i++) {
        if (runs[i].pid == 0)
            continue;
        if (runs[i].pidfd < 0 && timeout_ms > RUN_RECHECK_MS)
            timeout_ms = RUN_RECHECK_MS;
        else if (runs[i].pidfd >= 0)
            fds[nfds++] = (struct pollfd){.fd = runs[i].pidfd,
                                          .events = POLLIN};
    }
    if (timeout_ms > INT32_MAX)
        timeout_ms = INT32_MAX;
    /* A signal ends it early (EINTR): the caller looks at what changed. */
    (void)poll(fds, nfds, (int)timeout_ms);
}

int cli_run_reap(cli_run *runs, size_t slot)
{
    cli_run *run = &runs[slot];
    int wstatus;
    pid_t got;

    if (run->pid == 0)
        return -1;
    while ((got = waitpid(run->pid, &wstatus, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (got == 0)
        return -1;
    groups[slot] = 0;
    if (run->pidfd >= 0)
        close(run->pidfd);
    run->pid = 0;
    run->pidfd = -1;
    if (got < 0) /* not our child any more: say it failed */
        return 128;
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    return 128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
}

void cli_run_stop_all(cli_run *runs, size_t n)
{
    uint64_t start = cli_mono_ms();
    int signal = SIGTERM;
    size_t left;

    do {
        left = 0;
        for (size_t i = 0; i < n; i++)
            if (runs[i].pid != 0 && cli_run_reap(runs, i) < 0) {
                if (signal != 0)
                    kill(-runs[i].pid, signal);
                left++;
            }
        /* SIGTERM once; SIGKILL to what is still there after the wait. */
        signal = cli_mono_ms() - start >= RUN_STOP_WAIT_MS ? SIGKILL : 0;
        if (left > 0)
            cli_run_wait(runs, n, 50);
    } while (left > 0);
}
