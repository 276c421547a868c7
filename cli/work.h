/*
 * work.h - what the files of 'sluice work' share: work.c holds the command
 * and its loop, work_run.c the commands it runs for jobs and the signals
 * that stop it.
 */
#ifndef SLUICE_CLI_WORK_H
#define SLUICE_CLI_WORK_H

#include "cli.h"

#include <sys/types.h>

/* The most jobs one worker runs at once (--concurrency). */
#define CLI_WORK_CONCURRENCY_MAX 256u

/* A job whose command runs, in one of the worker's slots. */
typedef struct cli_run {
    pid_t pid;          /* CMD's process (and group); 0: the slot is free */
    int pidfd;          /* to poll() for its end; -1 without pidfd_open() */
    const char *queue;  /* the job's queue: the worker's copy of its name */
    size_t queue_len;
    uint64_t id, attempt, lease;
    uint64_t beat_ms;   /* when its lease is next renewed (monotonic ms) */
    bool lost;          /* a renewal answered SLUICE_ELEASE */
} cli_run;

/*
 * Starts 'cmd' with /bin/sh -c for 'job' of queue 'queue' (of 'queue_len'
 * bytes) in free slot 'slot' of 'runs': the payload on its standard input,
 * SLUICE_QUEUE, SLUICE_JOB_ID and SLUICE_ATTEMPT in its environment, its
 * standard output on standard error, in a process group of its own (so a
 * Ctrl-C meant for the worker lets it finish). Returns 0, or -1 when it
 * could not be started (reported).
 */
int cli_run_start(cli_run *runs, size_t slot, const char *cmd,
                  const char *queue, size_t queue_len, const sluice_job *job);

/*
 * Waits until one of the 'n' slots of 'runs' that run a command may have
 * ended, a signal arrives, or 'timeout_ms' has passed.
 */
void cli_run_wait(const cli_run *runs, size_t n, uint64_t timeout_ms);

/*
 * If the command in slot 'slot' of 'runs' has ended, frees the slot and
 * answers its exit status (128 + N when signal N killed it); else -1.
 */
int cli_run_reap(cli_run *runs, size_t slot);

/* Sends SIGTERM to every command running in 'runs' (of 'n') and waits for
   each to end, freeing the slots. */
void cli_run_stop_all(cli_run *runs, size_t n);

/*
 * Catches SIGINT and SIGTERM while the worker serves: the first asks it to
 * stop once the running jobs are finished (cli_work_stopping()), a second
 * passes SIGTERM to the running commands. cli_work_signals_off() puts the
 * previous handlers back.
 */
void cli_work_signals_on(void);
void cli_work_signals_off(void);
bool cli_work_stopping(void);

#endif /* SLUICE_CLI_WORK_H */
