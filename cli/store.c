/*
 * store.c - the store a command names with --store: opening it, and
 * reporting what the store or the library says when a call fails.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Where the URL comes from ---------------------------------------------- */

/* Where cli_store_url() found the URL, for cli_store_error()'s message:
   "--store", "--store-file PATH" or "SLUICE_STORE". */
static const char *url_source = "--store";

/* What kind of file 'mode' is, for a message: "a directory". */
static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/*
 * Reads up to 'cap' bytes of the open file 'fd' into 'buf', stopping at
 * the first newline or the end; '*len' is what was read. Returns 0, or -1
 * with errno set.
 */
static int read_first_line(int fd, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;

    while (n < cap && memchr(buf, '\n', n) == NULL) {
        ssize_t got = read(fd, buf + n, cap - n);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    *len = n;
    return 0;
}

/*
 * Reads the URL of --store-file 'path' into 'line' (CLI_STORE_FILE_LINE_MAX
 * + 2 bytes): its first line, trailing whitespace stripped. The file is
 * opened before it is looked at (fstat(), not stat()), so what is checked
 * is what is read, and without blocking, so that a FIFO named by mistake
 * is refused rather than waited on. Returns 0, or reports the problem and
 * returns CLI_EXIT_USAGE.
 */
static int read_store_file(char *line, const char *path)
{
    struct stat st;
    size_t len = 0;
    char *nl;
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0) {
        cli_error("--store-file: cannot open '%s': %s", path,
                  strerror(errno));
        return CLI_EXIT_USAGE;
    }
    if (fstat(fd, &st) < 0) {
        cli_error("--store-file: cannot read '%s': %s", path,
                  strerror(errno));
        close(fd);
        return CLI_EXIT_USAGE;
    }
    if (!S_ISREG(st.st_mode)) {
        cli_error("--store-file: '%s' is %s; it should be a file holding the "
                  "store's URL", path, file_kind(st.st_mode));
        close(fd);
        return CLI_EXIT_USAGE;
    }
    if ((st.st_mode & 077) != 0) {
        cli_error("--store-file: '%s' has mode %04o, so others than its "
                  "owner may read or change the store's URL and password; "
                  "run 'chmod 600 %s'", path,
                  (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return CLI_EXIT_USAGE;
    }
    if (read_first_line(fd, line, CLI_STORE_FILE_LINE_MAX + 1, &len) < 0) {
        cli_error("--store-file: cannot read '%s': %s", path,
                  strerror(errno));
        close(fd);
        return CLI_EXIT_USAGE;
    }
    close(fd);
    if ((nl = memchr(line, '\n', len)) != NULL)
        len = (size_t)(nl - line);
    else if (len > CLI_STORE_FILE_LINE_MAX) {
        cli_error("--store-file: the first line of '%s' is longer than %d "
                  "bytes; it should be the store's URL", path,
                  CLI_STORE_FILE_LINE_MAX);
        return CLI_EXIT_USAGE;
    }
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        len--;
    line[len] = '\0';
    if (memchr(line, '\0', len) != NULL) {
        cli_error("--store-file: the first line of '%s' holds a NUL byte; it "
                  "should be the store's URL", path);
        return CLI_EXIT_USAGE;
    }
    if (len == 0) {
        cli_error("--store-file: the first line of '%s' is empty; it should "
                  "be the store's URL, e.g. valkey://:PASSWORD@HOST:PORT",
                  path);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_store_url(const char **url, const char *cmd, const char *file)
{
    /* One URL per process: the CLI settles it once, single-threaded. */
    static char line[CLI_STORE_FILE_LINE_MAX + 2];
    static char source[64];
    const char *env;
    int st;

    if (*url != NULL && file != NULL)
        return cli_usage_error(cmd, "%s: --store and --store-file are given "
                               "both; give one", cmd);
    if (*url != NULL) {
        url_source = "--store";
    } else if (file != NULL) {
        if ((st = read_store_file(line, file)) != 0)
            return st;
        snprintf(source, sizeof(source), "--store-file %s", cli_shown(file));
        url_source = source;
        *url = line;
    } else if ((env = getenv(CLI_STORE_ENV)) != NULL && env[0] != '\0') {
        url_source = CLI_STORE_ENV;
        *url = env;
    }
    return 0;
}

/* ---- Opening --------------------------------------------------------------- */

int cli_store_open_status(int err)
{
    /* sluice_store_open() checks the URL whole before it connects: a URL
       that does not parse or has an unknown or bad option (SLUICE_EURL;
       SLUICE_EINVAL for a TLS option on a plaintext URL, SLUICE_ERANGE for
       a number out of range) is the user's text, found before any server
       is asked. Everything else (ECONN, ETIMEDOUT, EAUTH, ECONFIG,
       EPROTO, ENOMEM...) comes from trying to reach or use the store. */
    return err == SLUICE_EURL || err == SLUICE_EINVAL || err == SLUICE_ERANGE
               ? CLI_EXIT_USAGE
               : CLI_EXIT_RUNTIME;
}

bool cli_url_is_embedded(const char *url)
{
    return url == NULL || url[0] == '\0' || strcasecmp(url, "mem://") == 0;
}

int cli_store_open(sluice_store **store, const char *cmd, const char *url,
                   const char *server_why, const sluice_store_opts *opts)
{
    int err;

    *store = NULL;
    if (url == NULL && server_why != NULL)
        return cli_usage_error(cmd, "%s: missing --store (%s; or "
                               "--store-file PATH, or %s)", cmd, server_why,
                               CLI_STORE_ENV);
    if (url == NULL)
        url = "mem://";
    if ((err = sluice_store_open(store, url, opts)) < 0) {
        cli_store_error(url, err);
        return cli_store_open_status(err);
    }
    return 0;
}

/* ---- Errors ---------------------------------------------------------------- */

/*
 * Where the password of 'url' starts, and its length in '*len'; NULL when
 * the URL carries none. After the library's rule: the userinfo runs from
 * past the scheme (a name, its ':' and any '/', whichever its case and
 * even when malformed, "valkey:/") to the last '@' (a password may hold
 * '/' or '?' raw), and the password follows its first ':' (without one,
 * the whole userinfo is secret).
 */
static const char *url_password(const char *url, size_t *len)
{
    const char *p = url, *at, *colon;

    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
        p++;
    if (p > url && *p == ':')
        while (*++p == '/')
            ;
    else
        p = url;
    if ((at = strrchr(p, '@')) == NULL)
        return NULL;
    colon = memchr(p, ':', (size_t)(at - p));
    p = colon != NULL ? colon + 1 : p;
    *len = (size_t)(at - p);
    return p;
}

/* True when 'text' holds the 'len' bytes at 's'. */
static bool holds(const char *text, const char *s, size_t len)
{
    for (; *text != '\0'; text++)
        if (strncmp(text, s, len) == 0)
            return true;
    return false;
}

void cli_store_error(const char *url, int err)
{
    const char *msg = sluice_last_error();
    size_t pw_len = 0;
    const char *pw = url_password(url, &pw_len);

    /* The library masks the password; should a message still quote it
       whole (say, decoded), it is withheld. A short one would match by
       chance, so only one of CLI_SECRET_MIN bytes or more is looked for. */
    if (pw != NULL && pw_len >= CLI_SECRET_MIN &&
        holds(msg, pw, pw_len))
        cli_error("%s: cannot open the store: %s (detail withheld: it "
                  "quotes the URL's password)", url_source,
                  sluice_strerror(err));
    else
        cli_error("%s: %s", url_source, msg);
}

/*
 * sluice_last_error() for a call made for 'what', without the "WHAT: " it
 * may start with (the library names some calls as the CLI does, "queue
 * take: malformed reply"), so that a message names the command once.
 */
static const char *lib_detail(const char *what)
{
    const char *msg = sluice_last_error();
    size_t n = strlen(what);

    if (strncmp(msg, what, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

int cli_lib_error(const char *help_cmd, const char *what, int err)
{
    bool usage = err == SLUICE_ECOST || err == SLUICE_ENOTSUP;

    if (usage && help_cmd != NULL)
        return cli_usage_error(help_cmd, "%s: %s (%s)", what,
                               lib_detail(what), sluice_err_name(err));
    cli_error("%s: %s (%s)", what, lib_detail(what), sluice_err_name(err));
    return usage ? CLI_EXIT_USAGE : CLI_EXIT_RUNTIME;
}
