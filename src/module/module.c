/*
 * module.c - sluice.so: RedisModule_OnLoad(), the command table with each
 * command's flags and key specs, and SLUICE.VERSION.
 *
 * Key specs (SetCommandInfo(), Redis 7.0+) tell the server which arguments
 * are keys, so cluster routing (MOVED, CROSSSLOT) and ACL key patterns
 * apply to the module's commands as to the server's own; the legacy
 * (first, last, step) triple is given too where it can say it. Redis 7.0's
 * cluster routing reads only that triple or a command's getkeys-api, never
 * a keyword key spec: SLUICE.HITMANY, whose keys follow KEYS, answers the
 * getkeys-api too (hit.c).
 */
#include "module/module.h"

#include <stdio.h>
#include <string.h>

/* ---- SLUICE.VERSION --------------------------------------------------------- */

/*
 * "sluice.so VERSION api N algos NAME [NAME ...]": the module's version, its
 * API, and the algorithms it decides (those with glue in this build), so
 * that a client sends the others to their scripts (src/valkey/engine.c). A
 * client that reads only as far as the api number reads it as before.
 */
static int version_command(RedisModuleCtx *ctx, RedisModuleString **argv,
                           int argc)
{
    char text[64 + SLUICE__ALGO_N * 32];
    size_t len;

    (void)argv;
    if (argc != 1)
        return sluice__mod_error(ctx, "SLUICE.VERSION takes no argument");
    len = (size_t)snprintf(text, sizeof(text), "sluice.so %s api %d algos",
                           SLUICE_VERSION, REDISMODULE_APIVER_1);
    for (unsigned a = 0; a < SLUICE__ALGO_N && len < sizeof(text); a++)
        if (sluice__module_glues[a] != NULL)
            len += (size_t)snprintf(text + len, sizeof(text) - len, " %s",
                                    sluice__algos[a]->name);
    return RedisModule_ReplyWithStringBuffer(
        ctx, text, len < sizeof(text) ? len : sizeof(text) - 1);
}

/* ---- The command table -------------------------------------------------- */

#define KEY_SPEC_END {0}

/* SLUICE.HIT key ... and SLUICE.EMQINCR limiter window_ms [now]: one key,
   read and updated. */
static RedisModuleCommandKeySpec one_key_updated[] = {
    {.flags = REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS |
              REDISMODULE_CMD_KEY_UPDATE,
     .begin_search_type = REDISMODULE_KSPEC_BS_INDEX, .bs.index.pos = 1,
     .find_keys_type = REDISMODULE_KSPEC_FK_RANGE,
     .fk.range = {.lastkey = 0, .keystep = 1, .limit = 0}},
    KEY_SPEC_END,
};

/* SLUICE.HITMANY ... KEYS key cost [key cost ...]: every other argument
   after KEYS. */
static RedisModuleCommandKeySpec hitmany_keys[] = {
    {.flags = REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS |
              REDISMODULE_CMD_KEY_UPDATE,
     .begin_search_type = REDISMODULE_KSPEC_BS_KEYWORD,
     .bs.keyword = {.keyword = "KEYS", .startfrom = 1},
     .find_keys_type = REDISMODULE_KSPEC_FK_RANGE,
     .fk.range = {.lastkey = -1, .keystep = 2, .limit = 0}},
    KEY_SPEC_END,
};

/* SLUICE.RESET key [key ...]: every argument, deleted. */
static RedisModuleCommandKeySpec reset_keys[] = {
    {.flags = REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_DELETE,
     .begin_search_type = REDISMODULE_KSPEC_BS_INDEX, .bs.index.pos = 1,
     .find_keys_type = REDISMODULE_KSPEC_FK_RANGE,
     .fk.range = {.lastkey = -1, .keystep = 1, .limit = 0}},
    KEY_SPEC_END,
};

/* SLUICE.EMQTTL limiter meta [max [now]]: two keys, read. */
static RedisModuleCommandKeySpec emqttl_keys[] = {
    {.flags = REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS,
     .begin_search_type = REDISMODULE_KSPEC_BS_INDEX, .bs.index.pos = 1,
     .find_keys_type = REDISMODULE_KSPEC_FK_RANGE,
     .fk.range = {.lastkey = 1, .keystep = 1, .limit = 0}},
    KEY_SPEC_END,
};

typedef struct command {
    const char *name;
    RedisModuleCmdFunc func;
    const char *flags;
    int first, last, step; /* the legacy triple */
    RedisModuleCommandKeySpec *keys;
    const char *summary;
} command;

static const command commands[] = {
    {"sluice.hit", sluice__mod_hit, "write deny-oom", 1, 1, 1,
     one_key_updated,
     "Decides one request of a rate limit on its key"},
    {"sluice.hitmany", sluice__mod_hitmany, "write deny-oom getkeys-api", 0,
     0, 0,
     hitmany_keys, "Decides requests of one limit on several keys, in turn"},
    {"sluice.reset", sluice__mod_reset, "write", 1, -1, 1, reset_keys,
     "Deletes rate-limit keys"},
    {"sluice.emqincr", sluice__mod_emqincr, "write deny-oom", 1, 1, 1,
     one_key_updated, "Counts a job in a queue's fixed-window limiter"},
    {"sluice.emqttl", sluice__mod_emqttl, "readonly", 1, 2, 1, emqttl_keys,
     "The wait before a queue's limiter admits a job"},
    {"sluice.version", version_command, "readonly fast", 0, 0, 0, NULL,
     "The module's version"},
};

static const RedisModuleCommandInfoVersion info_version =
    REDISMODULE_COMMAND_INFO_VERSION_1;

/* Creates one command and gives it its key specs. */
static int create(RedisModuleCtx *ctx, const command *c)
{
    RedisModuleCommandInfo info = {
        .version = &info_version,
        .summary = c->summary,
        .since = SLUICE_VERSION,
        .key_specs = c->keys,
    };
    RedisModuleCommand *cmd;

    if (RedisModule_CreateCommand(ctx, c->name, c->func, c->flags, c->first,
                                  c->last, c->step) != REDISMODULE_OK ||
        (cmd = RedisModule_GetCommand(ctx, c->name)) == NULL ||
        RedisModule_SetCommandInfo(cmd, &info) != REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "sluice: cannot create %s", c->name);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

/* The one symbol sluice.so exports (see its version script). */
__attribute__((visibility("default"))) int
RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc)
{
    (void)argv;
    if (sluice__module_api_init(ctx, "sluice",
                                SLUICE_VERSION_MAJOR * 10000 +
                                    SLUICE_VERSION_MINOR * 100 +
                                    SLUICE_VERSION_PATCH) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (argc != 0) {
        RedisModule_Log(ctx, "warning", "sluice: takes no module argument");
        return REDISMODULE_ERR;
    }
    /* A key is signalled modified where a write happens (glue.h), not each
       time a key opened for writing is closed: a refusal or a peek leaves
       a WATCH alone, as the script does. */
    RedisModule_SetModuleOptions(ctx,
                                 REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (create(ctx, &commands[i]) != REDISMODULE_OK)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
