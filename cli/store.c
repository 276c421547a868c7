/*
 * store.c - the store a command names with --store: opening it, and
 * reporting what the store or the library says when a call fails.
 */
#include "cli.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* ---- Opening --------------------------------------------------------------- */

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
        return cli_usage_error(cmd, "%s: missing --store (%s)", cmd,
                               server_why);
    if (url == NULL)
        url = "mem://";
    if ((err = sluice_store_open(store, url, opts)) < 0) {
        cli_store_error(url, err);
        return CLI_EXIT_RUNTIME;
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
        cli_error("--store: cannot open the store: %s (detail withheld: it "
                  "quotes the URL's password)", sluice_strerror(err));
    else
        cli_error("--store: %s", msg);
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
