/*
 * url.c - a server store's URL and the options in its query.
 *
 *   valkey://[user:password@]host[:port][/db][?name=value&...]
 *   redis://  the same; valkeys://, rediss://  the same over TLS
 *   valkey+cluster://[user:password@]host[:port][,host[:port]...][?...]
 *   redis+cluster://  the same; valkeys+cluster://, rediss+cluster://  TLS
 *   unix://[user:password@]/path/to/socket[?db=N&...]
 *   valkey+unix://, redis+unix://  the same
 *   valkey+sentinel://[user:password@]host[:port][,...]/MASTER[?...]
 *   redis+sentinel://  the same; valkeys+sentinel://, rediss+sentinel://
 *                      TLS, to the sentinels and the master alike
 *
 * Percent-escapes are decoded in the user, password and query values. The
 * query's options (the table 'options' below) override the caller's
 * sluice_store_opts. Messages quote the URL with its userinfo masked and
 * its unprintable bytes replaced (sluice__url_shown()), never the URL
 * itself, and never a piece of it that an '@' follows: such a piece may be
 * a password written with a raw '/' or '?'.
 */
#include "valkey/valkey.h"

#include <ctype.h>
#include <stddef.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_PORT 6379
#define DEFAULT_SENTINEL_PORT 26379

/* ---- Pieces ------------------------------------------------------------------------ */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A NUL-terminated, percent-decoded copy of s[0..n); NULL if malformed. */
static char *decode(const char *s, size_t n, const char *url, const char *what,
                    int *err)
{
    char *d = malloc(n + 1), *p = d;

    if (d == NULL) {
        *err = sluice__error(SLUICE_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *p++ = s[i];
            continue;
        }
        /* Two hex digits, and not %00: the result is a C string. */
        if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
            (hexval(s[i + 1]) | hexval(s[i + 2])) == 0) {
            free(d);
            *err = sluice__error(SLUICE_EURL, "store URL '%s': bad %%-escape "
                                 "in the %s", url, what);
            return NULL;
        }
        *p++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
        i += 2;
    }
    *p = '\0';
    return d;
}

/*
 * Parses one "host[:port]" or "[v6]:port" in [p, end) into 'u'. Host names
 * hold letters, digits and ".-_:%" only.
 */
static int url_endpoint(sluice__vk_url *u, const char *p, const char *end,
                        const char *shown)
{
    const char *host = p, *hend;
    uint64_t num;
    int port = u->kind == SLUICE__VK_URL_SENTINEL ? DEFAULT_SENTINEL_PORT
                                          : DEFAULT_PORT;

    if (u->nhosts == SLUICE__VK_MAX_SEEDS)
        return sluice__error(SLUICE_EURL, "store URL '%s': more than %d "
                             "hosts", shown, SLUICE__VK_MAX_SEEDS);
    if (*host == '[') {
        hend = memchr(host, ']', (size_t)(end - host));
        if (hend == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': unclosed "
                                 "'[' in the host", shown);
        host++;
        p = hend + 1;
    } else {
        hend = host;
        while (hend < end && *hend != ':')
            hend++;
        p = hend;
    }
    if (hend == host)
        return sluice__error(SLUICE_EURL, "store URL '%s': no host", shown);
    for (const char *h = host; h < hend; h++)
        if (!isalnum((unsigned char)*h) && strchr(".-_:%", *h) == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': the host "
                                 "holds a byte 0x%02x that no host name "
                                 "has", shown, (unsigned char)*h);
    if (p < end && *p == ':') {
        if (sluice__parse_u64(p + 1, (size_t)(end - p - 1), 1, 65535, &num) < 0)
            return sluice__error(SLUICE_EURL, "store URL '%s': the port "
                                 "must be 1..65535", shown);
        port = (int)num;
    } else if (p != end) {
        return sluice__error(SLUICE_EURL, "store URL '%s': junk after the "
                             "host", shown);
    }
    if ((u->hosts[u->nhosts] = malloc((size_t)(hend - host) + 1)) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    memcpy(u->hosts[u->nhosts], host, (size_t)(hend - host));
    u->hosts[u->nhosts][hend - host] = '\0';
    u->ports[u->nhosts++] = port;
    return SLUICE_OK;
}

/* ---- The query's options ------------------------------------------------------------ */

/* One option's value, as the query gave it; 'url' is the URL as shown. */
typedef struct opt_value {
    const char *name;
    size_t nlen;
    const char *val;
    size_t vlen;
    const char *url;
} opt_value;

/*
 * Sets '*out' to the index of the value in the NULL-terminated 'words', or
 * reports which words the option takes.
 */
static int url_word(int *out, const char *const *words, const opt_value *ov)
{
    char list[96] = "";

    for (int i = 0; words[i] != NULL; i++) {
        if (strlen(words[i]) == ov->vlen &&
            memcmp(words[i], ov->val, ov->vlen) == 0) {
            *out = i;
            return SLUICE_OK;
        }
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                 i == 0 ? "" : words[i + 1] == NULL ? " or " : ", ", words[i]);
    }
    return sluice__error(SLUICE_EURL, "store URL '%s': %.*s must be %s",
                         ov->url, (int)ov->nlen, ov->name, list);
}

static int set_timeout(sluice__vk_url *u, sluice_store_opts *o,
                       const opt_value *ov)
{
    uint64_t num;

    (void)u;
    if (sluice__parse_u64(ov->val, ov->vlen, 1, SLUICE__VK_MAX_TIMEOUT_MS,
                          &num) < 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': %.*s must be "
                             "1..3600000 ms", ov->url, (int)ov->nlen,
                             ov->name);
    if (ov->nlen == 7) /* "timeout" */
        o->command_timeout_ms = num;
    else
        o->connect_timeout_ms = num;
    return SLUICE_OK;
}

static int set_reply_cap(sluice__vk_url *u, sluice_store_opts *o,
                         const opt_value *ov)
{
    bool bytes = ov->nlen == 15; /* "max_reply_bytes" */
    uint64_t min = bytes ? 2048 : 1, num;
    uint64_t max =
        bytes ? SLUICE__VK_MAX_REPLY_BYTES : SLUICE__VK_MAX_REPLY_ELEMENTS;

    (void)u;

    if (sluice__parse_u64(ov->val, ov->vlen, min, max, &num) < 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': %.*s must be "
                             "%llu..%llu", ov->url, (int)ov->nlen, ov->name,
                             (unsigned long long)min, (unsigned long long)max);
    if (bytes)
        o->max_reply_bytes = num;
    else
        o->max_reply_elements = num;
    return SLUICE_OK;
}

static int set_pool(sluice__vk_url *u, sluice_store_opts *o,
                    const opt_value *ov)
{
    uint64_t num;

    (void)u;
    if (sluice__parse_u64(ov->val, ov->vlen, 1, SLUICE__VK_MAX_POOL, &num) < 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': pool must be "
                             "1..%d", ov->url, SLUICE__VK_MAX_POOL);
    o->pool_size = (unsigned)num;
    return SLUICE_OK;
}

static int set_clock(sluice__vk_url *u, sluice_store_opts *o,
                     const opt_value *ov)
{
    static const char *const words[] = {"server", "caller", NULL};

    (void)u;
    return url_word(&o->caller_clock, words, ov);
}

static int set_engine(sluice__vk_url *u, sluice_store_opts *o,
                      const opt_value *ov)
{
    /* In the order of SLUICE_ENGINE_AUTO, _MODULE, _LUA. */
    static const char *const words[] = {"auto", "module", "lua", NULL};
    int i, err = url_word(&i, words, ov);

    (void)u;
    if (err == 0)
        o->engine = (sluice_engine)i;
    return err;
}

static int set_on_error(sluice__vk_url *u, sluice_store_opts *o,
                        const opt_value *ov)
{
    /* In the order of SLUICE_ON_ERROR_FAIL, _OPEN, _CLOSED. */
    static const char *const words[] = {"error", "open", "closed", NULL};
    int i, err = url_word(&i, words, ov);

    (void)u;
    if (err == 0)
        o->on_error = (sluice_on_error)i;
    return err;
}

static int set_refused_cache(sluice__vk_url *u, sluice_store_opts *o,
                             const opt_value *ov)
{
    /* In the order of SLUICE_REFUSED_CACHE_DEFAULT, _OFF, _ALL. */
    static const char *const words[] = {"default", "off", "all", NULL};
    int i, err = url_word(&i, words, ov);

    (void)u;
    if (err == 0)
        o->refused_cache = (sluice_refused_cache)i;
    return err;
}

static int set_prefix(sluice__vk_url *u, sluice_store_opts *o,
                      const opt_value *ov)
{
    char **slot = ov->nlen == 6 ? &u->prefix : &u->emq_prefix; /* "prefix" */
    int err = SLUICE_OK;
    char *text = decode(ov->val, ov->vlen, ov->url, "prefix", &err);

    (void)o;
    if (text == NULL)
        return err;
    /* Checked here too (store.c checks the options'), so that the message
       quotes the URL as shown, never the value: it may be part of a
       password that holds a raw '?'. */
    if (text[0] == '\0' || strpbrk(text, "{}") != NULL ||
        strlen(text) > SLUICE__PREFIX_MAX) {
        free(text);
        return sluice__error(SLUICE_EINVAL, "store URL '%s': %.*s must be "
                             "non-empty, at most %d bytes, and hold no brace",
                             ov->url, (int)ov->nlen, ov->name,
                             SLUICE__PREFIX_MAX);
    }
    free(*slot);
    *slot = text;
    return SLUICE_OK;
}

/* A string option of the TLS settings or the sentinels' credentials,
   percent-decoded into its place in 'u'. */
static int set_text(sluice__vk_url *u, sluice_store_opts *o,
                    const opt_value *ov)
{
    static const struct {
        const char *name;
        size_t at;
    } fields[] = {
        {"tls_ca", offsetof(sluice__vk_url, tls_ca)},
        {"tls_ca_dir", offsetof(sluice__vk_url, tls_ca_dir)},
        {"tls_cert", offsetof(sluice__vk_url, tls_cert)},
        {"tls_key", offsetof(sluice__vk_url, tls_key)},
        {"tls_server_name", offsetof(sluice__vk_url, tls_server_name)},
        {"sentinel_user", offsetof(sluice__vk_url, sentinel_user)},
        {"sentinel_password", offsetof(sluice__vk_url, sentinel_password)},
    };
    int err = SLUICE_OK;

    (void)o;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        char **slot = (char **)((char *)u + fields[i].at);
        char *text;

        if (strlen(fields[i].name) != ov->nlen ||
            memcmp(fields[i].name, ov->name, ov->nlen) != 0)
            continue;
        if ((text = decode(ov->val, ov->vlen, ov->url, fields[i].name,
                           &err)) == NULL)
            return err;
        if (text[0] == '\0') {
            free(text);
            return sluice__error(SLUICE_EURL, "store URL '%s': %s is empty",
                                 ov->url, fields[i].name);
        }
        free(*slot);
        *slot = text;
        return SLUICE_OK;
    }
    return sluice__error(SLUICE_EURL, "store URL '%s': unknown option",
                         ov->url);
}

static int set_insecure(sluice__vk_url *u, sluice_store_opts *o,
                        const opt_value *ov)
{
    static const char *const words[] = {"0", "1", NULL};

    (void)o;
    return url_word(&u->tls_insecure, words, ov);
}

static int set_db(sluice__vk_url *u, sluice_store_opts *o, const opt_value *ov)
{
    uint64_t num;

    (void)o;
    if (sluice__parse_u64(ov->val, ov->vlen, 0, INT_MAX, &num) < 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': db must be a "
                             "number", ov->url);
    u->db = (long)num;
    return SLUICE_OK;
}

/* The options of the query: a new one is a line here and a field of
   sluice_store_opts. */
static const struct url_option {
    const char *name;
    int (*set)(sluice__vk_url *u, sluice_store_opts *o, const opt_value *ov);
} options[] = {
    {"timeout", set_timeout},
    {"connect_timeout", set_timeout},
    {"prefix", set_prefix},
    {"emq_prefix", set_prefix},
    {"clock", set_clock},
    {"pool", set_pool},
    {"on_error", set_on_error},
    {"refused_cache", set_refused_cache},
    {"max_reply_bytes", set_reply_cap},
    {"max_reply_elements", set_reply_cap},
    {"engine", set_engine},
    {"db", set_db},
    {"tls_ca", set_text},
    {"tls_ca_dir", set_text},
    {"tls_cert", set_text},
    {"tls_key", set_text},
    {"tls_server_name", set_text},
    {"tls_insecure", set_insecure},
    {"sentinel_user", set_text},
    {"sentinel_password", set_text},
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static char options_text[512];
static pthread_once_t options_once = PTHREAD_ONCE_INIT;

static void options_text_make(void)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        snprintf(options_text + strlen(options_text),
                 sizeof(options_text) - strlen(options_text), "%s%s",
                 i == 0 ? "" : ", ", options[i].name);
}

const char *sluice_store_url_options(void)
{
    pthread_once(&options_once, options_text_make);
    return options_text;
}

static int url_query(sluice__vk_url *u, sluice_store_opts *o, const char *q,
                     const char *url)
{
    while (*q != '\0') {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', n);
        opt_value ov = {q, 0, NULL, 0, url};
        const struct url_option *opt = NULL;
        int err;

        if (eq == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': option '%.*s' "
                                 "has no value", url, (int)n, q);
        ov.nlen = (size_t)(eq - q);
        ov.val = eq + 1;
        ov.vlen = n - ov.nlen - 1;
        for (size_t i = 0; i < NOPTIONS && opt == NULL; i++)
            if (strlen(options[i].name) == ov.nlen &&
                memcmp(options[i].name, q, ov.nlen) == 0)
                opt = &options[i];
        if (opt == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': unknown option "
                                 "'%.*s' (known: %s)", url, (int)ov.nlen, q,
                                 sluice_store_url_options());
        if ((err = opt->set(u, o, &ov)) < 0)
            return err;
        q += n;
        if (*q == '&')
            q++;
    }
    return SLUICE_OK;
}

/* ---- The whole URL ------------------------------------------------------------------ */

/* Where the host part starts, past the scheme (in any case: RFC 3986's
   schemes are case-insensitive); sets the URL's kind and transport. */
static const char *url_scheme(sluice__vk_url *u, const char *url)
{
    static const struct {
        const char *scheme;
        sluice__vk_url_kind kind;
        const sluice__vk_transport *transport;
    } schemes[] = {
        {"valkey://", SLUICE__VK_URL_ONE, &sluice__vk_transport_tcp},
        {"redis://", SLUICE__VK_URL_ONE, &sluice__vk_transport_tcp},
        {"valkeys://", SLUICE__VK_URL_ONE, &sluice__vk_transport_tls},
        {"rediss://", SLUICE__VK_URL_ONE, &sluice__vk_transport_tls},
        {"valkey+cluster://", SLUICE__VK_URL_CLUSTER,
         &sluice__vk_transport_tcp},
        {"redis+cluster://", SLUICE__VK_URL_CLUSTER, &sluice__vk_transport_tcp},
        {"valkeys+cluster://", SLUICE__VK_URL_CLUSTER,
         &sluice__vk_transport_tls},
        {"rediss+cluster://", SLUICE__VK_URL_CLUSTER,
         &sluice__vk_transport_tls},
        {"unix://", SLUICE__VK_URL_ONE, &sluice__vk_transport_unix},
        {"valkey+unix://", SLUICE__VK_URL_ONE, &sluice__vk_transport_unix},
        {"redis+unix://", SLUICE__VK_URL_ONE, &sluice__vk_transport_unix},
        {"valkey+sentinel://", SLUICE__VK_URL_SENTINEL,
         &sluice__vk_transport_tcp},
        {"redis+sentinel://", SLUICE__VK_URL_SENTINEL,
         &sluice__vk_transport_tcp},
        {"valkeys+sentinel://", SLUICE__VK_URL_SENTINEL,
         &sluice__vk_transport_tls},
        {"rediss+sentinel://", SLUICE__VK_URL_SENTINEL,
         &sluice__vk_transport_tls},
    };

    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i].scheme);

        if (strncasecmp(url, schemes[i].scheme, n) == 0) {
            u->kind = schemes[i].kind;
            u->cluster = u->kind == SLUICE__VK_URL_CLUSTER;
            u->transport = schemes[i].transport;
            return url + n;
        }
    }
    return NULL;
}

/* The userinfo in [p, at): user and password, percent-decoded. */
static int url_userinfo(sluice__vk_url *u, const char *p, const char *at,
                        const char *shown)
{
    const char *colon = memchr(p, ':', (size_t)(at - p));
    int err = SLUICE_OK;

    if (colon == NULL)
        return sluice__error(SLUICE_EURL, "store URL '%s': a user needs a "
                             "password (user:password@ or :password@)", shown);
    if (colon > p && (u->user = decode(p, (size_t)(colon - p), shown, "user",
                                       &err)) == NULL)
        return err;
    if ((u->password = decode(colon + 1, (size_t)(at - colon - 1), shown,
                              "password", &err)) == NULL)
        return err;
    return SLUICE_OK;
}

/* The hosts in [p, end): one, or for a cluster a comma-separated list. */
static int url_hosts(sluice__vk_url *u, const char *p, const char *end,
                     const char *shown)
{
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        int err;

        if (comma != NULL && u->kind == SLUICE__VK_URL_ONE)
            return sluice__error(SLUICE_EURL, "store URL '%s': several hosts "
                                 "need valkey+cluster:// (or "
                                 "valkey+sentinel://)", shown);
        if ((err = url_endpoint(u, p, stop, shown)) < 0)
            return err;
        if (comma == NULL)
            return SLUICE_OK;
        p = comma + 1;
    }
}

/* The database in [p, end), after the path's '/'. */
static int url_db(sluice__vk_url *u, const char *p, const char *end,
                  const char *shown)
{
    uint64_t num;

    if (sluice__parse_u64(p, (size_t)(end - p), 0, INT_MAX, &num) < 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': the database "
                             "must be a number", shown);
    if (u->cluster && num != 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': a cluster has "
                             "only database 0", shown);
    u->db = (long)num;
    return SLUICE_OK;
}

/*
 * The error for a URL that does not parse and has an '@' after its host:
 * most likely a user or password written with a raw '/' or '?', so what
 * follows them (the path, the query) is part of a secret and is not quoted.
 */
static int at_after_host(const char *shown)
{
    return sluice__error(SLUICE_EURL, "store URL '%s': an '@' follows the "
                         "host: a user or password that holds '/' or '?' "
                         "writes them as %%2F and %%3F (and an '@' as %%40)",
                         shown);
}

/*
 * A Unix socket's URL past its scheme, [p, end): an optional userinfo and
 * '@', then the socket's absolute path (percent-decoded).
 */
static int url_unix(sluice__vk_url *u, const char *p, const char *end,
                    const char *shown)
{
    const char *at = p[0] == '/' ? NULL : strstr(p, "@/");
    int err = SLUICE_OK;

    if (at != NULL && at < end) {
        if ((err = url_userinfo(u, p, at, shown)) < 0)
            return err;
        p = at + 1;
    }
    if (p >= end || *p != '/')
        return sluice__error(SLUICE_EURL, "store URL '%s': a Unix socket "
                             "needs its absolute path: unix:///path/to/"
                             "socket", shown);
    if ((u->hosts[0] = decode(p, (size_t)(end - p), shown, "path",
                              &err)) == NULL)
        return err;
    u->ports[0] = 0;
    u->nhosts = 1;
    return SLUICE_OK;
}

/* The sentinels' name of the master, in [p, end) after the path's '/'. */
static int url_master(sluice__vk_url *u, const char *p, const char *end,
                      const char *shown)
{
    int err = SLUICE_OK;

    if (p >= end)
        return sluice__error(SLUICE_EURL, "store URL '%s': a sentinel URL "
                             "names its master: valkey+sentinel://HOST:PORT/"
                             "MASTER_NAME", shown);
    if ((u->master = decode(p, (size_t)(end - p), shown, "master name",
                            &err)) == NULL)
        return err;
    return SLUICE_OK;
}

/* What a URL's kind and transport rule out, once it is read whole. */
static int url_check(const sluice__vk_url *u, const char *shown)
{
    bool tls = u->transport == &sluice__vk_transport_tls;

    if (!tls && (u->tls_ca || u->tls_ca_dir || u->tls_cert || u->tls_key ||
                 u->tls_server_name || u->tls_insecure >= 0))
        return sluice__error(SLUICE_EURL, "store URL '%s': the tls_* options "
                             "need TLS: valkeys://, rediss:// (or their "
                             "+cluster and +sentinel forms)", shown);
    if (u->kind != SLUICE__VK_URL_SENTINEL &&
        (u->sentinel_user != NULL || u->sentinel_password != NULL))
        return sluice__error(SLUICE_EURL, "store URL '%s': sentinel_user and "
                             "sentinel_password need valkey+sentinel://",
                             shown);
    if (u->cluster && u->db != 0)
        return sluice__error(SLUICE_EURL, "store URL '%s': a cluster has "
                             "only database 0", shown);
    return SLUICE_OK;
}

int sluice__vk_url_parse(sluice__vk_url *u, sluice_store_opts *o,
                         const char *url)
{
    const char *p, *end, *at = NULL, *query, *slash, *auth_end;
    char shown[SLUICE__SHOWN_MAX];
    int err;

    sluice__url_shown(shown, sizeof(shown), url);
    u->tls_insecure = -1;
    if ((p = url_scheme(u, url)) == NULL)
        return sluice__error(SLUICE_EURL, "store URL '%s': expected "
                             "valkey://, redis://, valkeys://, rediss://, "
                             "their +cluster and +sentinel forms, or "
                             "unix://", shown);
    if (strchr(p, '#') != NULL)
        return sluice__error(SLUICE_EURL, "store URL '%s': a store URL has no "
                             "#fragment (a '#' in a user or password is "
                             "written %%23)", shown);
    query = strchr(p, '?');
    end = query ? query : p + strlen(p);
    if (u->transport == &sluice__vk_transport_unix) {
        if ((err = url_unix(u, p, end, shown)) < 0 ||
            (query != NULL && (err = url_query(u, o, query + 1, shown)) < 0))
            return err;
        return url_check(u, shown);
    }
    slash = memchr(p, '/', (size_t)(end - p));
    auth_end = slash ? slash : end;
    /* userinfo: up to the last '@' before the path */
    for (const char *s = p; s < auth_end; s++)
        if (*s == '@')
            at = s;
    if (at != NULL) {
        if ((err = url_userinfo(u, p, at, shown)) < 0)
            return err;
        p = at + 1;
    }
    if ((err = url_hosts(u, p, auth_end, shown)) < 0)
        return strchr(auth_end, '@') == NULL ? err : at_after_host(shown);
    if (u->kind == SLUICE__VK_URL_SENTINEL)
        err = url_master(u, slash != NULL ? slash + 1 : end, end, shown);
    else if (slash != NULL && slash + 1 < end)
        err = url_db(u, slash + 1, end, shown);
    if (err < 0 ||
        (query != NULL && (err = url_query(u, o, query + 1, shown)) < 0))
        return strchr(auth_end, '@') == NULL ? err : at_after_host(shown);
    return url_check(u, shown);
}

void sluice__vk_url_free(sluice__vk_url *u)
{
    for (size_t i = 0; i < u->nhosts; i++)
        free(u->hosts[i]);
    free(u->user);
    free(u->password);
    free(u->prefix);
    free(u->emq_prefix);
    free(u->master);
    free(u->sentinel_user);
    free(u->sentinel_password);
    free(u->tls_ca);
    free(u->tls_ca_dir);
    free(u->tls_cert);
    free(u->tls_key);
    free(u->tls_server_name);
}
