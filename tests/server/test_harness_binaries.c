/*
 * test_harness_binaries.c - the launcher runs the build it is told to:
 * $SLUICE_TEST_SERVER, $SLUICE_TEST_CLI and $SLUICE_TEST_SENTINEL each
 * pointed at a wrapper script (written here) that logs its arguments and
 * then execs the real program, and each wrapper must have run; a path that
 * is not an executable is refused at once with a message naming it; and
 * without them the redis- programs are found in PATH, else the valkey-
 * ones.
 */
#include "cluster.h"
#include "server.h"
#include "test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* ---- Helpers ------------------------------------------------------------- */

/*
 * Writes DIR/'name': a script that appends its arguments to DIR/'name'.log
 * and execs 'real'. Its path into 'path'; 0 or -1.
 */
static int write_wrapper(const char *name, const char *real, char *path,
                         size_t cap)
{
    FILE *f;

    snprintf(path, cap, "%s/%s", dir, name);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f, "#!/bin/sh\necho \"$@\" >>'%s.log'\nexec '%s' \"$@\"\n", path,
            real);
    fclose(f);
    return chmod(path, 0755);
}

/* The wrapper 'path' logged a line holding 'want'. */
static int logged(const char *path, const char *want)
{
    char log[320], line[4096];
    FILE *f;
    int found = 0;

    snprintf(log, sizeof(log), "%s.log", path);
    if ((f = fopen(log, "r")) == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, want) != NULL;
    fclose(f);
    return found;
}

/*
 * Calls rs_start() with SLUICE_TEST_SERVER='value', its stderr into
 * 'err'. Returns rs_start()'s result; '*ms' gets how long it took.
 */
static int start_with(const char *value, char *err, size_t cap, uint64_t *ms)
{
    char path[300];
    int saved = dup(STDERR_FILENO), fd, rc;
    ssize_t got;
    rs_server s;
    uint64_t t0;

    snprintf(path, sizeof(path), "%s/stderr", dir);
    fflush(stderr);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDERR_FILENO);
    setenv(RS_SERVER_ENV, value, 1);
    t0 = rs_mono_ms();
    rc = rs_start(&s, NULL);
    *ms = rs_mono_ms() - t0;
    rs_stop(&s);
    unsetenv(RS_SERVER_ENV);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    got = pread(fd, err, cap - 1, 0);
    err[got > 0 ? got : 0] = '\0';
    close(fd);
    return rc;
}

/* ---- The wrappers run ---------------------------------------------------- */

static void test_wrappers(const char *real_server, const char *real_cli,
                          const char *real_sentinel)
{
    static const char *const ping[] = {"PING", NULL};
    char server_w[300], cli_w[300], sentinel_w[300], out[4096], conf[128];
    rs_server s, sentinel;
    rc_cluster c;

    CHECK(write_wrapper("server", real_server, server_w, 300) == 0);
    CHECK(write_wrapper("cli", real_cli, cli_w, 300) == 0);
    CHECK(write_wrapper("sentinel", real_sentinel, sentinel_w, 300) == 0);
    setenv(RS_SERVER_ENV, server_w, 1);
    setenv(RS_CLI_ENV, cli_w, 1);
    setenv(RS_SENTINEL_ENV, sentinel_w, 1);

    CHECK(rs_start(&s, NULL) == 0);
    CHECK(strcmp(s.binary, server_w) == 0);
    CHECK(logged(server_w, "--port"));
    CHECK(rs_describe(&s, out, sizeof(out)) == 0 &&
          (strncmp(out, "redis ", 6) == 0 || strncmp(out, "valkey ", 7) == 0) &&
          strstr(out, server_w) != NULL);
    CHECK(rs_cli(&s, ping, out, sizeof(out)) == 0 && strstr(out, "PONG"));
    CHECK(logged(cli_w, "PING"));

    snprintf(conf, sizeof(conf), "sentinel monitor m 127.0.0.1 %d 1\n",
             s.port);
    CHECK(rs_start_sentinel(&sentinel, conf, NULL) == 0);
    CHECK(logged(sentinel_w, "sentinel.conf"));
    rs_stop(&sentinel);
    rs_stop(&s);

    /* The cluster is made by `$SLUICE_TEST_CLI --cluster create`. */
    if (CHECK(rc_start(&c, 3, 0, NULL) == 0))
        rc_stop(&c);
    CHECK(logged(cli_w, "--cluster create"));
    unsetenv(RS_SERVER_ENV);
    unsetenv(RS_CLI_ENV);
    unsetenv(RS_SENTINEL_ENV);
}

/* ---- A bad path ---------------------------------------------------------- */

static void test_bad_paths(void)
{
    char err[4096], plain[300], want[400];
    uint64_t ms;
    FILE *f;

    CHECK(start_with("/nope", err, sizeof(err), &ms) < 0);
    CHECK(strstr(err, "SLUICE_TEST_SERVER=/nope: not an executable") != NULL);
    CHECK(ms < 1000);
    /* A directory, and a file that may not be run. */
    CHECK(start_with(dir, err, sizeof(err), &ms) < 0);
    snprintf(want, sizeof(want), "SLUICE_TEST_SERVER=%s: not an executable",
             dir);
    CHECK(strstr(err, want) != NULL);
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    if ((f = fopen(plain, "w")) != NULL)
        fclose(f);
    CHECK(start_with(plain, err, sizeof(err), &ms) < 0);
    CHECK(strstr(err, "plain: not an executable") != NULL);
    /* A bare name is looked up in PATH. */
    CHECK(start_with("no-such-server-here", err, sizeof(err), &ms) < 0);
    CHECK(strstr(err, "=no-such-server-here: not an executable") != NULL);
}

/* ---- Without the variables ----------------------------------------------- */

/* The redis- program in PATH; with only valkey-server there, that one. */
static void test_defaults(const char *real_server)
{
    char bin[300], link[320], *path = getenv("PATH");
    char saved[4096];
    const char *got = rs_binary(RS_PROGRAM_SERVER);

    CHECK(got != NULL && (strstr(got, "/redis-server") != NULL ||
                          strstr(got, "/valkey-server") != NULL));
    snprintf(saved, sizeof(saved), "%s", path != NULL ? path : "");
    snprintf(bin, sizeof(bin), "%s/bin", dir);
    mkdir(bin, 0700);
    snprintf(link, sizeof(link), "%s/valkey-server", bin);
    CHECK(symlink(real_server, link) == 0);
    setenv("PATH", bin, 1);
    got = rs_binary(RS_PROGRAM_SERVER);
    CHECK(got != NULL && strcmp(got, link) == 0);
    CHECK(rs_binary(RS_PROGRAM_CLI) == NULL);
    setenv("PATH", saved, 1);
}

int main(void)
{
    char real_server[1024], real_cli[1024], real_sentinel[1024];
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/sluice-binaries-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL || rs_binary(RS_PROGRAM_SERVER) == NULL ||
        rs_binary(RS_PROGRAM_CLI) == NULL ||
        rs_binary(RS_PROGRAM_SENTINEL) == NULL) {
        fprintf(stderr, "test_harness_binaries: no temporary directory, or "
                "a program missing\n");
        return 1;
    }
    snprintf(real_server, sizeof(real_server), "%s",
             rs_binary(RS_PROGRAM_SERVER));
    snprintf(real_cli, sizeof(real_cli), "%s", rs_binary(RS_PROGRAM_CLI));
    snprintf(real_sentinel, sizeof(real_sentinel), "%s",
             rs_binary(RS_PROGRAM_SENTINEL));
    printf("test_harness_binaries: wrappers in %s around %s, %s, %s\n", dir,
           real_server, real_cli, real_sentinel);
    test_wrappers(real_server, real_cli, real_sentinel);
    test_bad_paths();
    test_defaults(real_server);
    rs_remove_tree(dir);
    return test_summary("test_harness_binaries");
}
