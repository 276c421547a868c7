/*
 * store.c - the store a command names with --store: opening it, and
 * reporting what the store or the library says when a call fails.
 */
#include "cli.h"

#include <string.h>

/* ---- Opening --------------------------------------------------------------- */

bool cli_url_is_embedded(const char *url)
{
    return url == NULL || url[0] == '\0' || strcmp(url, "mem://") == 0;
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
 * Where the password of 'url' ("scheme://[user]:PASSWORD@host...") starts,
 * and its length in '*len'; NULL when the URL carries none.
 */
static const char *url_password(const char *url, size_t *len)
{
    const char *p = strstr(url, "://");
    const char *auth_end, *at = NULL, *colon;

    if (p == NULL)
        return NULL;
    p += 3;
    auth_end = p + strcspn(p, "/?#");
    for (const char *s = p; s < auth_end; s++)
        if (*s == '@')
            at = s;
    if (at == NULL || (colon = memchr(p, ':', (size_t)(at - p))) == NULL)
        return NULL;
    *len = (size_t)(at - colon - 1);
    return colon + 1;
}

void cli_store_error(const char *url, int err)
{
    const char *msg = sluice_last_error();
    const char *pw, *hit;
    size_t pw_len = 0, url_len = strlen(url), used = 0;
    char out[1024], secret[256];

    if (!cli_is_plain(url)) {
        /* The library quotes the URL as it is: say it here, without it. */
        cli_error("--store: cannot open the store: %s (the URL holds bytes "
                  "that are not printable ASCII)", sluice_strerror(err));
        return;
    }
    pw = url_password(url, &pw_len);
    if (pw == NULL || pw_len == 0 || pw_len >= sizeof(secret)) {
        cli_error("--store: %s", pw == NULL || pw_len == 0
                                     ? msg
                                     : "cannot open the store (detail "
                                       "withheld: the URL holds a password)");
        return;
    }
    memcpy(secret, pw, pw_len);
    secret[pw_len] = '\0';
    /* Each copy of the URL in the message, with its password masked. */
    out[0] = '\0';
    while ((hit = strstr(msg, url)) != NULL && used < sizeof(out)) {
        used += (size_t)snprintf(out + used, sizeof(out) - used,
                                 "%.*s%.*s***%s", (int)(hit - msg), msg,
                                 (int)(pw - url), url, pw + pw_len);
        msg = hit + url_len;
    }
    if (used < sizeof(out))
        snprintf(out + used, sizeof(out) - used, "%s", msg);
    /* A detail that still quotes the password (say, decoded) is withheld. */
    if (strstr(out, secret) != NULL)
        cli_error("--store: cannot open the store (detail withheld: it "
                  "quotes the URL's password)");
    else
        cli_error("--store: %s", out);
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
