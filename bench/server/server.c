/*
 * server.c - the server the benchmark talks to: its own (launch.c) or the
 * one --store names. The control connection, on which the harness reads the
 * server's CPU (INFO cpu) and its command statistics (INFO commandstats,
 * after CONFIG RESETSTAT) and empties its own server between cases; and the
 * URLs and connections the callers use.
 */
#include "bench_server.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- The control connection ---------------------------------------------- */

/* Runs a command on the control connection; prints and NULLs on failure. */
redisReply *ctl_cmd(server *s, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = redisvCommand(s->ctl, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fprintf(stderr, "sluice_bench_server: the server did not answer "
                "'%s': %s\n", fmt, s->ctl->errstr);
    return r;
}

/* The value of 'field' in an INFO reply ("field:value" lines), or NULL. */
static const char *info_field(const char *info, const char *field)
{
    size_t len = strlen(field);

    for (const char *p = info; p != NULL && *p != '\0';) {
        if (strncmp(p, field, len) == 0 && p[len] == ':')
            return p + len + 1;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return NULL;
}

/* The server's CPU time so far (user + system), in seconds; -1 if unknown. */
double server_cpu_s(server *s)
{
    redisReply *r = ctl_cmd(s, "INFO cpu");
    const char *u, *y;
    double v = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_STRING &&
        (u = info_field(r->str, "used_cpu_user")) != NULL &&
        (y = info_field(r->str, "used_cpu_sys")) != NULL)
        v = strtod(u, NULL) + strtod(y, NULL);
    freeReplyObject(r);
    return v;
}

/* Zeroes the server's command statistics. */
void stats_reset(server *s)
{
    redisReply *r = ctl_cmd(s, "CONFIG RESETSTAT");

    if (r != NULL)
        freeReplyObject(r);
}

/*
 * From INFO commandstats: the calls and usec of command 'cmd' (e.g.
 * "evalsha"); with 'cmd' NULL, the sum over the data commands that the
 * sluice scripts run (what a script spends outside the Lua interpreter).
 */
void stats_read(server *s, const char *cmd, double *calls, double *usec)
{
    static const char *const inner[] = {
        "get", "pttl", "del", "pexpire", "incrby", "time", "hmget", "hset",
        "zrange", "zremrangebyscore", "zcard", "zadd", "set", "decrby"};
    redisReply *r = ctl_cmd(s, "INFO commandstats");
    char field[64];

    *calls = *usec = 0;
    if (r == NULL)
        return;
    for (size_t i = 0; r->type == REDIS_REPLY_STRING &&
                       i < (cmd ? 1 : sizeof(inner) / sizeof(inner[0]));
         i++) {
        const char *v;

        snprintf(field, sizeof(field), "cmdstat_%s", cmd ? cmd : inner[i]);
        if ((v = info_field(r->str, field)) == NULL)
            continue;
        if (strncmp(v, "calls=", 6) == 0)
            *calls += strtod(v + 6, NULL);
        if ((v = strstr(v, "usec=")) != NULL)
            *usec += strtod(v + 5, NULL);
    }
    freeReplyObject(r);
}

/* Empties the server between cases, when it is the harness's own. */
void server_flush(server *s)
{
    redisReply *r;

    if (!s->own)
        return;
    if ((r = ctl_cmd(s, "FLUSHALL")) != NULL)
        freeReplyObject(r);
}

/*
 * Starts measuring the server over a run: CONFIG RESETSTAT, then its CPU so
 * far (INFO cpu), which it answers for meter_stop().
 */
double meter_start(server *s)
{
    stats_reset(s);
    return server_cpu_s(s);
}

/*
 * The server's share of run 'r' since meter_start() answered 'srv0': its
 * CPU, and the calls and usec_per_call of the case's command 'cmd'.
 */
void meter_stop(server *s, double srv0, const char *cmd, run_result *r)
{
    double srv1 = server_cpu_s(s), calls, usec;

    stats_read(s, cmd, &calls, &usec);
    r->srv_cpu_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    r->cmd_usec = calls > 0 ? usec / calls : -1;
    r->cmd_calls = calls;
}

/* ---- Reaching the server ------------------------------------------------- */

/*
 * Parses a server URL, "redis://[[user]:password@]host[:port][/db][?...]"
 * (or valkey://), into 's'. Cluster URLs are refused: the references run
 * against one server.
 */
static int url_parse(server *s, const char *url)
{
    const char *rest = strstr(url, "://"), *end, *at, *colon, *slash;
    char auth[400] = "";

    if (rest == NULL || strncmp(url, "redis://", 8) != 0) {
        if (rest == NULL || strncmp(url, "valkey://", 9) != 0) {
            fprintf(stderr, "sluice_bench_server: --store wants a "
                    "redis://HOST:PORT or valkey://HOST:PORT URL of one "
                    "server, not '%s'\n", url);
            return -1;
        }
    }
    if (strstr(url, "pool=") != NULL) {
        fprintf(stderr, "sluice_bench_server: --store must not set pool=; "
                "the harness chooses it per case\n");
        return -1;
    }
    rest += 3;
    end = strchr(rest, '?');
    if (end == NULL)
        end = rest + strlen(rest);
    at = memchr(rest, '@', (size_t)(end - rest));
    if (at != NULL) {
        snprintf(auth, sizeof(auth), "%.*s", (int)(at - rest), rest);
        if ((colon = strchr(auth, ':')) != NULL) {
            snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - auth),
                     auth);
            snprintf(s->password, sizeof(s->password), "%s", colon + 1);
        } else {
            snprintf(s->password, sizeof(s->password), "%s", auth);
        }
        rest = at + 1;
    }
    slash = memchr(rest, '/', (size_t)(end - rest));
    if (slash == NULL)
        slash = end;
    colon = memchr(rest, ':', (size_t)(slash - rest));
    snprintf(s->host, sizeof(s->host), "%.*s",
             (int)((colon ? colon : slash) - rest), rest);
    s->port = colon ? atoi(colon + 1) : 6379;
    s->db = slash < end ? strtol(slash + 1, NULL, 10) : 0;
    if (s->host[0] == '\0' || s->port <= 0 || s->port > 65535) {
        fprintf(stderr, "sluice_bench_server: cannot read a host and port "
                "in '%s'\n", url);
        return -1;
    }
    snprintf(s->sluice_url, sizeof(s->sluice_url), "%s", url);
    snprintf(s->peer_url, sizeof(s->peer_url), "redis://%s%s%.*s", auth,
             at ? "@" : "", (int)(end - rest), rest);
    return 0;
}

/*
 * A connection to the server, logged in (AUTH, SELECT); NULL, or one with
 * 'err' set, when it could not connect.
 */
static redisContext *server_connect(const server *s)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    redisReply *r;

    if (c == NULL || c->err)
        return c;
    redisSetTimeout(c, tv);
    if (s->password[0] != '\0') {
        r = s->user[0] ? redisCommand(c, "AUTH %s %s", s->user, s->password)
                       : redisCommand(c, "AUTH %s", s->password);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (s->db != 0 && (r = redisCommand(c, "SELECT %ld", s->db)) != NULL)
        freeReplyObject(r);
    return c;
}

/*
 * Starts the own server (with 'url' NULL), or reaches the given one; opens
 * the control connection and reads what the server is: valkey and its
 * valkey_version when INFO server has one, else redis and its
 * redis_version.
 */
int server_open(server *s, const char *url)
{
    char own_url[256];
    redisReply *r;
    const char *v = NULL;

    if (url == NULL) {
        if (bench_server_start(own_url, sizeof(own_url)) < 0)
            return -1;
        s->own = true;
        url = own_url;
        snprintf(s->binary, sizeof(s->binary), "%s", bench_server_binary());
    }
    if (url_parse(s, url) < 0)
        return -1;
    s->ctl = server_connect(s);
    if (s->ctl == NULL || s->ctl->err) {
        fprintf(stderr, "sluice_bench_server: cannot reach %s:%d: %s\n",
                s->host, s->port, s->ctl ? s->ctl->errstr : "out of memory");
        return -1;
    }
    if ((r = ctl_cmd(s, "INFO server")) == NULL)
        return -1;
    snprintf(s->name, sizeof(s->name), "redis");
    if (r->type == REDIS_REPLY_STRING &&
        (v = info_field(r->str, "valkey_version")) != NULL)
        snprintf(s->name, sizeof(s->name), "valkey");
    else if (r->type == REDIS_REPLY_STRING)
        v = info_field(r->str, "redis_version");
    if (v != NULL)
        snprintf(s->version, sizeof(s->version), "%.*s",
                 (int)strcspn(v, "\r\n"), v);
    freeReplyObject(r);
    return 0;
}

/* Closes the control connection, and stops the own server. */
void server_close(server *s)
{
    redisFree(s->ctl);
    s->ctl = NULL;
    if (s->own)
        bench_server_stop();
}

/* A sluice URL for the server with 'pool' connections and 'extra' options. */
void sluice_url_for(const server *s, unsigned pool, const char *extra,
                    char *out, size_t cap)
{
    /* The scripts, unless 'extra' names another engine (it comes later,
       and a later option wins). */
    snprintf(out, cap, "%s%spool=%u&engine=lua%s%s", s->sluice_url,
             strchr(s->sluice_url, '?') ? "&" : "?", pool,
             extra != NULL ? "&" : "", extra != NULL ? extra : "");
}

/* A hiredis connection of a caller's own to the server (AUTH, SELECT). */
redisContext *raw_connect(const server *s)
{
    redisContext *c = server_connect(s);

    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}
