/*
 * api.c - the module API's function pointers (redismodule_api.h), defined
 * and resolved from the one list SLUICE__MODULE_API.
 */
#include "module/redismodule_api.h"

#include <stddef.h>

#define SLUICE__MODULE_API_DEFINE(ret, name, params) \
    ret(*RedisModule_##name) params = NULL;
SLUICE__MODULE_API(SLUICE__MODULE_API_DEFINE)
SLUICE__MODULE_API_OPTIONAL(SLUICE__MODULE_API_DEFINE)
#undef SLUICE__MODULE_API_DEFINE

/* The server's lookup of a function by name: the first word of the context
   the server gives to RedisModule_OnLoad(). */
typedef int (*get_api_fn)(const char *name, void *out);

/*
 * Resolves both lists, recording the first required name the server lacks
 * in 'missing' (the others are still tried, so Log may be there to say so).
 */
static void resolve_all(get_api_fn get_api, const char **missing)
{
#define SLUICE__MODULE_API_RESOLVE(ret, name, params)                        \
    if (get_api("RedisModule_" #name, (void *)&RedisModule_##name) !=        \
            REDISMODULE_OK ||                                                \
        RedisModule_##name == NULL) {                                        \
        RedisModule_##name = NULL;                                           \
        if (*missing == NULL)                                                \
            *missing = "RedisModule_" #name;                                 \
    }
    SLUICE__MODULE_API(SLUICE__MODULE_API_RESOLVE)
#undef SLUICE__MODULE_API_RESOLVE
#define SLUICE__MODULE_API_TRY(ret, name, params)                        \
    if (get_api("RedisModule_" #name, (void *)&RedisModule_##name) !=    \
        REDISMODULE_OK)                                                  \
        RedisModule_##name = NULL;
    SLUICE__MODULE_API_OPTIONAL(SLUICE__MODULE_API_TRY)
#undef SLUICE__MODULE_API_TRY
}

int sluice__module_api_init(RedisModuleCtx *ctx, const char *name, int ver)
{
    get_api_fn get_api;
    const char *missing = NULL;
    void *first = ((void **)ctx)[0];

    /* A data pointer to a function pointer: as every module does, through
       an integer of the pointer's width. */
    get_api = (get_api_fn)(uintptr_t)first;
    resolve_all(get_api, &missing);
    if (RedisModule_IsModuleNameBusy == NULL ||
        RedisModule_SetModuleAttribs == NULL ||
        RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, REDISMODULE_APIVER_1);
    if (missing != NULL) {
        if (RedisModule_Log != NULL)
            RedisModule_Log(ctx, "warning",
                            "sluice: this server lacks %s (needs 7.0 or later)",
                            missing);
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
