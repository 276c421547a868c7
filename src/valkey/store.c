/*
 * store.c - the Valkey/Redis store's table, its server interface, and
 * opening and freeing it (see valkey.h for the parts).
 *
 * One server decides through combine.c, so threads deciding at once share
 * script calls; a cluster decides each hit alone, as a call set of one
 * (decide_calls.c), since its keys rarely share a slot. Both answer
 * batches with one call per slot. The
 * guard (src/store/guard.c) wraps either: this file knows nothing of the
 * refused-key cache or the failure policy, nor of the queue, which reaches
 * the server through the server interface below.
 */
#include "valkey/valkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CONNECT_TIMEOUT_MS 1000
#define DEFAULT_COMMAND_TIMEOUT_MS 500
#define DEFAULT_POOL 4
#define DEFAULT_MAX_REPLY_BYTES ((uint64_t)64 << 20)
#define DEFAULT_MAX_REPLY_ELEMENTS ((uint64_t)1 << 20)
#define SERVER_BULK_MAX ((uint64_t)512 << 20) /* proto-max-bulk-len */
#define VK_REPLY_ROOM 1024u /* a take's reply beyond its payload */

/* ---- The store's table ----------------------------------------------------------- */

/* What reply 'r' is, for a message: "the integer -1", "a status", ... */
static void reply_shown(char *out, size_t cap, const redisReply *r)
{
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        snprintf(out, cap, "the integer %lld", r->integer);
        break;
    case REDIS_REPLY_STATUS:
        snprintf(out, cap, "a status");
        break;
    case REDIS_REPLY_STRING:
        snprintf(out, cap, "a string of %zu bytes", r->len);
        break;
    case REDIS_REPLY_ARRAY:
        snprintf(out, cap, "an array of %zu", r->elements);
        break;
    case REDIS_REPLY_NIL:
        snprintf(out, cap, "nil");
        break;
    default:
        snprintf(out, cap, "a reply of type %d", r->type);
    }
}

/*
 * Forgets the key of 'limit' on 'key': one DEL, whose reply must be what a
 * DEL of one key answers, the integer 0 or 1, and is the answer (1: a
 * count was there); anything else (a status, a negative number, an array,
 * a string) is SLUICE_EPROTO, since a server that answers so has not been
 * seen to delete anything.
 */
static int vk_reset(void *impl, const sluice_limit *limit, const char *key,
                    size_t key_len)
{
    sluice__vk_store *v = impl;
    char kbuf[SLUICE__VK_KEY_BUF];
    size_t klen;
    char *k = sluice__key_build(kbuf, sizeof(kbuf), &klen, v->prefix, key,
                                key_len, sluice__algos[limit->algo]->name);
    const char *argv[2] = {"DEL", k};
    size_t lens[2] = {3, klen};
    redisReply *r = NULL;
    int err;

    if (k == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    if ((err = sluice__vk_call(v, k, klen, NULL, 2, argv, lens, &r)) == 0) {
        if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
            r->integer > 1) {
            char what[48];

            reply_shown(what, sizeof(what), r);
            err = sluice__error(SLUICE_EPROTO, "reset: DEL answered %s, not "
                                "the integer 0 or 1", what);
        } else {
            err = (int)r->integer; /* 1: a count was there */
        }
        freeReplyObject(r);
    }
    if (k != kbuf)
        free(k);
    return err;
}

static int vk_stats(void *impl, sluice_store_stats *out)
{
    sluice__vk_store *v = impl;

    out->redirects = atomic_load(&v->redirects);
    out->module_calls = atomic_load(&v->module_calls);
    return SLUICE_OK;
}

static void vk_free(void *impl)
{
    sluice__vk_store *v = impl;

    for (size_t i = 0; i < v->nnodes; i++)
        sluice__vk_node_free(v->nodes[i]);
    free(v->nodes);
    for (size_t i = 0; i < v->nsentinels; i++)
        sluice__vk_node_free(v->sentinels[i]);
    free(v->sentinels);
    free(v->master_name);
    free(v->sentinel_user);
    free(v->sentinel_password);
    sluice__vk_tls_free(v->tls);
    pthread_mutex_destroy(&v->combine_lock);
    pthread_mutex_destroy(&v->refresh_lock);
    pthread_rwlock_destroy(&v->map_lock);
    free(v->user);
    free(v->password);
    free(v->prefix);
    free(v->emq_prefix);
    free(v);
}

static const sluice__store_ops vk_ops = {
    .decide = sluice__vk_decide_combined,
    .decide_many = sluice__vk_decide_many,
    .reset = vk_reset,
    .decide_all = sluice__vk_decide_all,
    .stats = vk_stats,
    .free = vk_free,
};

static const sluice__store_ops vk_cluster_ops = {
    .decide = sluice__vk_decide,
    .decide_many = sluice__vk_decide_many,
    .reset = vk_reset,
    .decide_all = sluice__vk_decide_all,
    .stats = vk_stats,
    .free = vk_free,
};

/* ---- The server interface (for the queue) ------------------------------------------ */

#define EVAL_ARGS_STACK 24

static int vk_eval(void *impl, const sluice__script *script, int nkeys,
                   int argc, const char *const *args, const size_t *arglens,
                   redisReply **out)
{
    const char *stack_argv[EVAL_ARGS_STACK], **argv = stack_argv;
    size_t stack_lens[EVAL_ARGS_STACK], *lens = stack_lens;
    char numkeys[24];
    int err;

    if (nkeys < 1 || nkeys > argc)
        return sluice__error(SLUICE_EINVAL, "a script call takes at least "
                             "one key, and its keys first");
    if (argc + 3 > EVAL_ARGS_STACK &&
        ((argv = malloc((size_t)(argc + 3) * sizeof(*argv))) == NULL ||
         (lens = malloc((size_t)(argc + 3) * sizeof(*lens))) == NULL)) {
        if (argv != stack_argv)
            free(argv);
        return sluice__error(SLUICE_ENOMEM, "no memory for a script call of "
                             "%d arguments", argc);
    }
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = script->sha1;
    lens[1] = 40;
    argv[2] = numkeys;
    lens[2] = sluice__u64_text(numkeys, (uint64_t)nkeys);
    for (int i = 0; i < argc; i++) {
        argv[3 + i] = args[i];
        lens[3 + i] = arglens[i];
    }
    err = sluice__vk_call(impl, args[0], arglens[0], script, 3 + argc, argv,
                          lens, out);
    if (argv != stack_argv) {
        free(argv);
        free(lens);
    }
    return err;
}

static int vk_eval_module(void *impl, const char *command,
                          const sluice__script *script, int nkeys, int argc,
                          const char *const *args, const size_t *arglens,
                          redisReply **out)
{
    bool done = false;
    int err;

    if (nkeys >= 1 && nkeys <= argc &&
        ((err = sluice__vk_engine_eval(impl, command, argc, args, arglens,
                                       out, &done)) < 0 ||
         done))
        return err;
    return vk_eval(impl, script, nkeys, argc, args, arglens, out);
}

static int vk_command(void *impl, const char *key, size_t key_len, int argc,
                      const char **argv, const size_t *lens, redisReply **out)
{
    return sluice__vk_call(impl, key, key_len, NULL, argc, argv, lens, out);
}

/* Sends one command to 'n'; an error reply is an error naming 'n'. */
static int node_command(sluice__vk_store *v, sluice__vk_node *n, int argc,
                        const char **argv, const size_t *lens)
{
    uint64_t deadline = sluice__monotonic_ms() + v->command_timeout_ms;
    redisReply *r = NULL;
    int err = sluice__vk_node_send(v, n, false, deadline, NULL, argc, argv,
                                   lens, &r);

    if (err == 0 && r->type == REDIS_REPLY_ERROR)
        err = sluice__vk_reply_error(n, r, argv[0]);
    if (r != NULL)
        freeReplyObject(r);
    return err;
}

/*
 * The server interface's command_primaries (store.h): a cluster's masters
 * are the nodes its map, read afresh, names for some slot. Nodes are only
 * ever added to v->nodes, never freed before the store, so the pointers
 * taken under the lock stay good after it.
 */
static int vk_command_primaries(void *impl, int argc, const char **argv,
                                const size_t *lens, size_t *done)
{
    sluice__vk_store *v = impl;
    sluice__vk_node **todo;
    size_t n = 0;
    int err;

    *done = 0;
    if (!v->cluster) {
        redisReply *r = NULL;

        if ((err = sluice__vk_call(v, "", 0, NULL, argc, argv, lens, &r)) < 0)
            return err;
        freeReplyObject(r);
        *done = 1;
        return SLUICE_OK;
    }
    if ((err = sluice__vk_map_refresh(v, true)) < 0)
        return err;
    pthread_rwlock_rdlock(&v->map_lock);
    todo = calloc(v->nnodes + 1, sizeof(*todo));
    for (size_t i = 0; todo != NULL && i < v->nnodes; i++)
        for (unsigned s = 0; s < SLUICE__SLOTS; s++)
            if (v->slots[s] == (int32_t)i) {
                todo[n++] = v->nodes[i];
                break;
            }
    pthread_rwlock_unlock(&v->map_lock);
    if (todo == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for the node list");
    for (size_t i = 0; i < n && err == 0; i++)
        if ((err = node_command(v, todo[i], argc, argv, lens)) == 0)
            (*done)++;
    free(todo);
    return err;
}

static const sluice__server_ops vk_server_ops = {
    .eval = vk_eval,
    .eval_module = vk_eval_module,
    .command = vk_command,
    .command_primaries = vk_command_primaries,
    .subscribe = sluice__vk_subscribe,
    .sub_next = sluice__vk_sub_next,
    .sub_free = sluice__vk_sub_free,
};

/* ---- Opening --------------------------------------------------------------------- */

static char *dup_or(const char *s, const char *dflt)
{
    const char *src = s != NULL ? s : dflt;
    size_t n = strlen(src) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, src, n);
    return d;
}

static int prefix_check(const char *prefix, const char *what)
{
    if (prefix[0] == '\0' || strpbrk(prefix, "{}") != NULL ||
        strlen(prefix) > SLUICE__PREFIX_MAX)
        return sluice__error(SLUICE_EINVAL, "%s '%.40s' must be non-empty, "
                             "at most %d bytes, and hold no brace", what,
                             prefix, SLUICE__PREFIX_MAX);
    return SLUICE_OK;
}

/* A store for the parsed URL 'u' (whose strings it takes) and options 'o';
   NULL when out of memory. */
static sluice__vk_store *store_new(sluice__vk_url *u,
                                   const sluice_store_opts *o)
{
    sluice__vk_store *v = calloc(1, sizeof(*v));

    if (v == NULL)
        return NULL;
    v->transport = u->transport;
    v->user = u->user;
    v->password = u->password;
    v->db = u->db;
    v->prefix = u->prefix ? u->prefix : dup_or(o->key_prefix, "sluice");
    v->emq_prefix = u->emq_prefix ? u->emq_prefix
                                  : dup_or(o->emq_prefix, "emq");
    u->user = u->password = u->prefix = u->emq_prefix = NULL; /* now v's */
    v->connect_timeout_ms = o->connect_timeout_ms;
    v->command_timeout_ms = o->command_timeout_ms;
    v->max_reply_bytes = o->max_reply_bytes;
    v->max_reply_elements = o->max_reply_elements;
    v->pool_size = o->pool_size;
    v->caller_clock = o->caller_clock;
    v->engine = o->engine;
    v->clock_ms = o->clock_ms;
    v->clock_payload = o->clock_payload;
    v->token_seed = sluice__random_seed();
    v->cluster = u->cluster;
    v->sentinel = u->kind == SLUICE__VK_URL_SENTINEL;
    pthread_mutex_init(&v->combine_lock, NULL);
    v->waiting_tail = &v->waiting;
    pthread_mutex_init(&v->refresh_lock, NULL);
    pthread_rwlock_init(&v->map_lock, NULL);
    for (unsigned s = 0; s < SLUICE__SLOTS; s++)
        v->slots[s] = -1;
    atomic_store(&v->map_stale, 1);
    return v;
}

/*
 * The store's TLS context, from the URL's tls_* options where it gave them
 * and the caller's options elsewhere. TLS options for a store without TLS
 * are an error: a URL that lost its 's' must not send in plaintext what
 * its caller meant to encrypt.
 */
static int store_tls(sluice__vk_store *v, const sluice__vk_url *u,
                     const sluice_store_opts *o)
{
    sluice__vk_tls_opts t = {
        .ca_file = u->tls_ca ? u->tls_ca : o->tls_ca_file,
        .ca_dir = u->tls_ca_dir ? u->tls_ca_dir : o->tls_ca_dir,
        .cert_file = u->tls_cert ? u->tls_cert : o->tls_cert_file,
        .key_file = u->tls_key ? u->tls_key : o->tls_key_file,
        .server_name = u->tls_server_name ? u->tls_server_name
                                          : o->tls_server_name,
        .insecure = u->tls_insecure >= 0 ? u->tls_insecure == 1
                                         : o->tls_insecure != 0,
    };

    if (v->transport != &sluice__vk_transport_tls) {
        if (t.ca_file || t.ca_dir || t.cert_file || t.key_file ||
            t.server_name || t.insecure)
            return sluice__error(SLUICE_EINVAL, "TLS options for a store "
                                 "without TLS: use valkeys:// or rediss://");
        return SLUICE_OK;
    }
    return sluice__vk_tls_new(&v->tls, &t);
}

/* A sentinel store's sentinels (the URL's hosts), its master's name and
   the sentinels' credentials. */
static int store_sentinels(sluice__vk_store *v, sluice__vk_url *u,
                           const sluice_store_opts *o)
{
    const char *user = u->sentinel_user ? u->sentinel_user : o->sentinel_user;
    const char *password = u->sentinel_password ? u->sentinel_password
                                                : o->sentinel_password;

    if ((v->sentinels = calloc(u->nhosts, sizeof(*v->sentinels))) == NULL ||
        (v->master_name = strdup(u->master)) == NULL ||
        (user != NULL && (v->sentinel_user = strdup(user)) == NULL) ||
        (password != NULL &&
         (v->sentinel_password = strdup(password)) == NULL))
        return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    for (size_t i = 0; i < u->nhosts; i++) {
        sluice__vk_node *n = sluice__vk_node_new(
            u->hosts[i], strlen(u->hosts[i]), u->ports[i], v->transport, 1);

        if (n == NULL)
            return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
        n->is_sentinel = true;
        v->sentinels[v->nsentinels++] = n;
    }
    return SLUICE_OK;
}

/* Checks one option: 'v' must be at most 'max' ('what' names it). */
static int opt_at_most(const char *what, uint64_t v, uint64_t max)
{
    if (v > max)
        return sluice__error(SLUICE_EINVAL, "%s %llu is above %llu", what,
                             (unsigned long long)v, (unsigned long long)max);
    return SLUICE_OK;
}

/* Gives 'o' the defaults of what it leaves at 0; checks what it sets. */
static int opts_settle(sluice_store_opts *o)
{
    int err;

    if ((err = opt_at_most("connect_timeout_ms", o->connect_timeout_ms,
                           SLUICE__VK_MAX_TIMEOUT_MS)) < 0 ||
        (err = opt_at_most("command_timeout_ms", o->command_timeout_ms,
                           SLUICE__VK_MAX_TIMEOUT_MS)) < 0 ||
        (err = opt_at_most("pool_size", o->pool_size, SLUICE__VK_MAX_POOL)) <
            0 ||
        (err = opt_at_most("max_reply_bytes", o->max_reply_bytes,
                           SLUICE__VK_MAX_REPLY_BYTES)) < 0 ||
        (o->max_reply_bytes != 0 && o->max_reply_bytes < 2 * VK_REPLY_ROOM &&
         (err = sluice__error(SLUICE_EINVAL,
                              "max_reply_bytes %llu is below "
                              "%u",
                              (unsigned long long)o->max_reply_bytes,
                              2 * VK_REPLY_ROOM)) < 0) ||
        (err = opt_at_most("max_reply_elements", o->max_reply_elements,
                           SLUICE__VK_MAX_REPLY_ELEMENTS)) < 0 ||
        (err = opt_at_most("caller_clock", (uint64_t)o->caller_clock, 1)) < 0 ||
        (err = opt_at_most("engine", (uint64_t)o->engine, SLUICE_ENGINE_LUA)) <
            0 ||
        (err = opt_at_most("tls_insecure", (uint64_t)o->tls_insecure, 1)) < 0)
        return err;
    if (o->clock_ms == NULL) { /* clock=caller: the wall clock, which
                                  every process shares */
        o->clock_ms = sluice_clock_realtime_ms;
        o->clock_payload = NULL;
    }
    if (o->connect_timeout_ms == 0)
        o->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    if (o->command_timeout_ms == 0)
        o->command_timeout_ms = DEFAULT_COMMAND_TIMEOUT_MS;
    if (o->pool_size == 0)
        o->pool_size = DEFAULT_POOL;
    if (o->max_reply_bytes == 0)
        o->max_reply_bytes = DEFAULT_MAX_REPLY_BYTES;
    if (o->max_reply_elements == 0)
        o->max_reply_elements = DEFAULT_MAX_REPLY_ELEMENTS;
    return SLUICE_OK;
}

int sluice__valkey_open(sluice__opened *out, sluice_store_opts *o,
                        const char *url)
{
    sluice__vk_url u;
    sluice__vk_store *v = NULL;
    int err;

    memset(&u, 0, sizeof(u));
    if ((err = sluice__vk_url_parse(&u, o, url)) == 0 &&
        (err = opts_settle(o)) == 0 && (v = store_new(&u, o)) == NULL)
        err = sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    if (err == 0)
        err = store_tls(v, &u, o);
    if (err == 0 && v->sentinel)
        err = store_sentinels(v, &u, o);
    for (size_t i = 0; i < u.nhosts && err == 0 && !v->sentinel; i++)
        if (sluice__vk_node_get(v, u.hosts[i], strlen(u.hosts[i]),
                                u.ports[i]) == NULL)
            err = sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    sluice__vk_url_free(&u);
    if (err == 0 && (v->prefix == NULL || v->emq_prefix == NULL))
        err = sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    if (err == 0 && (err = prefix_check(v->prefix, "key prefix")) == 0)
        err = prefix_check(v->emq_prefix, "queue prefix");
    if (err < 0) {
        if (v != NULL)
            vk_free(v);
        return err;
    }
    out->ops = v->cluster ? &vk_cluster_ops : &vk_ops;
    out->impl = v;
    out->kind = v->cluster ? "valkey-cluster"
                : v->sentinel ? "valkey-sentinel" : "valkey";
    out->server = &vk_server_ops;
    out->emq_prefix = v->emq_prefix;
    if (v->caller_clock) {
        out->caller_clock_ms = v->clock_ms;
        out->caller_clock_payload = v->clock_payload;
    }
    /* A payload must come back in a take's reply, and the server takes no
       argument over proto-max-bulk-len (512 MB by default). */
    out->max_payload = v->max_reply_bytes - VK_REPLY_ROOM;
    if (out->max_payload > SERVER_BULK_MAX - VK_REPLY_ROOM)
        out->max_payload = SERVER_BULK_MAX - VK_REPLY_ROOM;
    out->remote = true;
    return SLUICE_OK;
}
