/*
 * cmd.c - commands through the async API: a reset (its DEL a script,
 * reset.lua), and any script with its keys (sluice__async_eval(), the
 * queue's), each one call routed by its first key.
 */
#include "async/async.h"

#include <stdlib.h>
#include <string.h>

/* Formats argv into '*out'; SLUICE_ENOMEM when it cannot. */
static int format(char **out, size_t *len, int argc, const char **argv,
                  const size_t *lens)
{
    char *cmd = NULL;
    long long n = redisFormatCommandArgv(&cmd, argc, argv, lens);

    if (n < 0 || (*out = malloc((size_t)n)) == NULL) {
        if (cmd != NULL)
            redisFreeCommand(cmd);
        return sluice__error(SLUICE_ENOMEM, "no memory for a command");
    }
    memcpy(*out, cmd, (size_t)n);
    *len = (size_t)n;
    redisFreeCommand(cmd);
    return SLUICE_OK;
}

/* Starts CMD call 'c' (formatted) on the node of 'key's slot. */
static void cmd_start(sluice_async *a, sluice__acall *c, const char *key,
                      size_t key_len)
{
    c->slot = a->v->cluster ? sluice__key_slot(key, key_len) : 0;
    sluice__async_dispatch(a, c);
}

/* argv[0..argc) with 'head' (1 or 3 words) before 'args'. */
static int argv_join(const char ***argv, size_t **lens, const char **head,
                     const size_t *head_lens, int nhead, int argc,
                     const char *const *args, const size_t *arglens)
{
    *argv = malloc((size_t)(nhead + argc) * sizeof(**argv));
    *lens = malloc((size_t)(nhead + argc) * sizeof(**lens));
    if (*argv == NULL || *lens == NULL) {
        free(*argv);
        free(*lens);
        return sluice__error(SLUICE_ENOMEM, "no memory for a command");
    }
    for (int i = 0; i < nhead; i++) {
        (*argv)[i] = head[i];
        (*lens)[i] = head_lens[i];
    }
    for (int i = 0; i < argc; i++) {
        (*argv)[nhead + i] = args[i];
        (*lens)[nhead + i] = arglens[i];
    }
    return SLUICE_OK;
}

/* The EVALSHA of 'script', and its module twin 'module' (NULL: none),
   formatted into 'c'. */
static int eval_format(sluice__acall *c, const sluice__script *script,
                       const char *module, int nkeys, int argc,
                       const char *const *args, const size_t *arglens)
{
    char numkeys[24];
    const char *head[3] = {"EVALSHA", script->sha1, numkeys};
    size_t head_lens[3] = {7, 40, 0};
    const char **argv;
    size_t *lens;
    int err;

    head_lens[2] = sluice__u64_text(numkeys, (uint64_t)nkeys);
    if ((err = argv_join(&argv, &lens, head, head_lens, 3, argc, args,
                         arglens)) < 0)
        return err;
    err = format(&c->cmd, &c->cmd_len, 3 + argc, argv, lens);
    if (err == 0 && module != NULL) {
        argv[2] = module; /* the twin: the keys and arguments after it */
        lens[2] = strlen(module);
        err = format(&c->module_cmd, &c->module_len, 1 + argc, argv + 2,
                     lens + 2);
    }
    free(argv);
    free(lens);
    return err;
}

int sluice__async_eval(sluice_async *a, const sluice__script *script,
                       const char *module, int nkeys, int argc,
                       const char *const *args, const size_t *lens,
                       sluice__async_reply_fn fn, void *arg)
{
    sluice__acall *c = NULL;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (a->v == NULL)
        err = sluice__error(SLUICE_ENOTSUP, "the store is not on a server");
    else if (fn == NULL || script == NULL || nkeys < 1 || nkeys > argc)
        err = sluice__error(SLUICE_EINVAL, "a script call takes a callback, "
                            "at least one key, and its keys first");
    else if ((c = sluice__acall_new(a, SLUICE__ACALL_CMD, arg)) == NULL)
        err = SLUICE_ENOMEM;
    else if ((err = eval_format(c, script, module, nkeys, argc, args,
                                lens)) < 0)
        sluice__acall_drop(a, c);
    if (err == 0) {
        c->cb.reply = fn;
        c->script = script;
        cmd_start(a, c, args[0], lens[0]);
    }
    sluice__async_leave(a);
    return err;
}

int sluice__async_command(sluice_async *a, int argc, const char **argv,
                          const size_t *lens, sluice__async_reply_fn fn,
                          void *arg)
{
    sluice__acall *c = NULL;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (a->v == NULL)
        err = sluice__error(SLUICE_ENOTSUP, "the store is not on a server");
    else if (fn == NULL || argc < 2)
        err = sluice__error(SLUICE_EINVAL, "a command takes a callback and "
                            "a key");
    else if ((c = sluice__acall_new(a, SLUICE__ACALL_CMD, arg)) == NULL)
        err = SLUICE_ENOMEM;
    else if ((err = format(&c->cmd, &c->cmd_len, argc, argv, lens)) < 0)
        sluice__acall_drop(a, c);
    if (err == 0) {
        c->cb.reply = fn;
        cmd_start(a, c, argv[1], lens[1]);
    }
    sluice__async_leave(a);
    return err;
}

/* ---- Reset -------------------------------------------------------------------------------- */

typedef struct reset_arg {
    sluice_async_done_cb cb;
    void *user;
} reset_arg;

static void reset_reply(sluice_async *a, int err, redisReply *r,
                        const char *msg, void *arg)
{
    reset_arg ra = *(reset_arg *)arg;

    free(arg);
    if (err == 0 && r != NULL &&
        (r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
                     r->integer > 1))
        err = sluice__error(SLUICE_EPROTO, "reset: DEL answered no integer "
                            "0 or 1");
    else if (err == 0 && r != NULL)
        err = (int)r->integer; /* 1: a count was there, as sluice_reset() */
    else if (err < 0)
        sluice__error(err, "%s", msg);
    if (r != NULL)
        freeReplyObject(r);
    ra.cb(a, err, ra.user);
}

/* The embedded store's reset, answered at the next turn. */
static void done_now(sluice_async *a, int err, redisReply *r,
                     const char *msg, void *arg)
{
    (void)r;
    reset_reply(a, err, NULL, msg, arg);
}

static int reset_server(sluice_async *a, const sluice_limit *limit,
                        const char *key, size_t key_len, reset_arg *ra)
{
    char kbuf[SLUICE__VK_KEY_BUF];
    size_t klen = 0;
    char *k = sluice__key_build(kbuf, sizeof(kbuf), &klen, a->v->prefix, key,
                                key_len, sluice__algos[limit->algo]->name);
    const char *args[1] = {k};
    size_t lens[1] = {klen};
    int err;

    if (k == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    if (a->guard != NULL)
        sluice__guard_forget(a->guard, limit, key, key_len);
    /* The DEL as a script (reset.lua), never a plain DEL: a NOSCRIPT that
       sends the decisions before it again sends it again after them. */
    err = sluice__async_eval(a, &sluice__script_async_reset, NULL, 1, 1,
                             args, lens, reset_reply, ra);
    if (k != kbuf)
        free(k);
    return err;
}

int sluice_async_reset(sluice_async *a, const sluice_limit *limit,
                       const char *key, size_t key_len,
                       sluice_async_done_cb cb, void *user)
{
    reset_arg *ra;
    sluice__acall *c;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (cb == NULL)
        err = sluice__error(SLUICE_EINVAL, "the callback is NULL");
    else if ((err = sluice__key_check(a->store, key, key_len)) == 0)
        err = sluice_limit_check(limit);
    if (err == 0 && (ra = malloc(sizeof(*ra))) == NULL)
        err = sluice__error(SLUICE_ENOMEM, "no memory for a reset");
    if (err == 0) {
        *ra = (reset_arg){cb, user};
        if (a->v != NULL) {
            if ((err = reset_server(a, limit, key, key_len, ra)) < 0)
                free(ra);
        } else if ((c = sluice__acall_new(a, SLUICE__ACALL_CMD, ra)) == NULL) {
            free(ra);
            err = SLUICE_ENOMEM;
        } else {
            c->cb.reply = done_now;
            err = a->store->ops->reset(a->store->impl, limit, key, key_len);
            sluice__acall_ready(a, c, err);
            err = SLUICE_OK;
        }
    }
    sluice__async_leave(a);
    return err;
}
