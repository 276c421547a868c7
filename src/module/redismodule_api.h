/*
 * redismodule_api.h - the part of the server's module API that sluice.so
 * uses, declared here from the public API reference (no such header is
 * packaged). Redis 7.0+ and Valkey serve it; API version 1.
 *
 * The server hands a module its functions by name: the first word of the
 * context given to RedisModule_OnLoad() is a pointer to RedisModule_GetApi(),
 * which fills in each function pointer below. sluice__module_api_init()
 * does that once, from the lists SLUICE__MODULE_API (required) and
 * SLUICE__MODULE_API_OPTIONAL, before anything else is called. The types are opaque: the module only ever holds pointers to
 * them. The pointers keep the API's own names (RedisModule_OpenKey, ...),
 * so a reader of the reference recognises every call.
 */
#ifndef SLUICE_MODULE_REDISMODULE_API_H
#define SLUICE_MODULE_REDISMODULE_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- Status, open modes, key types ---------------------------------------- */

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_LIST 2
#define REDISMODULE_KEYTYPE_HASH 3
#define REDISMODULE_KEYTYPE_SET 4
#define REDISMODULE_KEYTYPE_ZSET 5
#define REDISMODULE_KEYTYPE_MODULE 6
#define REDISMODULE_KEYTYPE_STREAM 7

/* GetExpire()/GetAbsExpire() of a key without a TTL (or no key). */
#define REDISMODULE_NO_EXPIRE -1

/* The server's own message for a key of the wrong type. */
#define REDISMODULE_ERRORMSG_WRONGTYPE \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* ---- Sorted sets and hashes ------------------------------------------------- */

/* ZsetAdd() flags: in, ... */
#define REDISMODULE_ZADD_XX (1 << 0)
#define REDISMODULE_ZADD_NX (1 << 1)
/* ... and out. */
#define REDISMODULE_ZADD_ADDED (1 << 2)
#define REDISMODULE_ZADD_UPDATED (1 << 3)
#define REDISMODULE_ZADD_NOP (1 << 4)
#define REDISMODULE_ZADD_GT (1 << 5)
#define REDISMODULE_ZADD_LT (1 << 6)

#define REDISMODULE_POSITIVE_INFINITE (1.0 / 0.0)
#define REDISMODULE_NEGATIVE_INFINITE (-1.0 / 0.0)

/* HashGet()/HashSet() flags. Their variadic lists end with a NULL field. */
#define REDISMODULE_HASH_NONE 0
#define REDISMODULE_HASH_NX (1 << 0)
#define REDISMODULE_HASH_XX (1 << 1)
#define REDISMODULE_HASH_CFIELDS (1 << 2) /* fields as C strings */
#define REDISMODULE_HASH_EXISTS (1 << 3)
#define REDISMODULE_HASH_COUNT_ALL (1 << 4)
/* HashSet()'s value that deletes a field. */
#define REDISMODULE_HASH_DELETE ((RedisModuleString *)(intptr_t)1)

/* ---- Call replies ----------------------------------------------------------- */

#define REDISMODULE_REPLY_UNKNOWN -1
#define REDISMODULE_REPLY_STRING 0
#define REDISMODULE_REPLY_ERROR 1
#define REDISMODULE_REPLY_INTEGER 2
#define REDISMODULE_REPLY_ARRAY 3
#define REDISMODULE_REPLY_NULL 4
#define REDISMODULE_REPLY_MAP 5
#define REDISMODULE_REPLY_SET 6
#define REDISMODULE_REPLY_BOOL 7
#define REDISMODULE_REPLY_DOUBLE 8
#define REDISMODULE_REPLY_BIG_NUMBER 9
#define REDISMODULE_REPLY_VERBATIM_STRING 10
#define REDISMODULE_REPLY_ATTRIBUTE 11

/* ---- Context flags (GetContextFlags()) -------------------------------------- */

#define REDISMODULE_CTX_FLAGS_LUA (1 << 0)
#define REDISMODULE_CTX_FLAGS_MULTI (1 << 1)
#define REDISMODULE_CTX_FLAGS_MASTER (1 << 2)
#define REDISMODULE_CTX_FLAGS_SLAVE (1 << 3)
#define REDISMODULE_CTX_FLAGS_READONLY (1 << 4)
#define REDISMODULE_CTX_FLAGS_CLUSTER (1 << 5)
#define REDISMODULE_CTX_FLAGS_AOF (1 << 6)
#define REDISMODULE_CTX_FLAGS_RDB (1 << 7)
#define REDISMODULE_CTX_FLAGS_MAXMEMORY (1 << 8)
#define REDISMODULE_CTX_FLAGS_EVICT (1 << 9)
#define REDISMODULE_CTX_FLAGS_OOM (1 << 10)
#define REDISMODULE_CTX_FLAGS_OOM_WARNING (1 << 11)
#define REDISMODULE_CTX_FLAGS_REPLICATED (1 << 12)
#define REDISMODULE_CTX_FLAGS_LOADING (1 << 13)

/* ---- Keyspace events and modified keys ------------------------------------ */

/* NotifyKeyspaceEvent()'s classes: the letters of notify-keyspace-events
   (g, $, h, z, n) that a subscriber's configuration selects. */
#define REDISMODULE_NOTIFY_GENERIC (1 << 2)
#define REDISMODULE_NOTIFY_STRING (1 << 3)
#define REDISMODULE_NOTIFY_HASH (1 << 6)
#define REDISMODULE_NOTIFY_ZSET (1 << 7)
#define REDISMODULE_NOTIFY_NEW (1 << 14) /* "new": a key made (7.0+) */

/* SetModuleOptions(): a key opened for writing is not signalled as
   modified (WATCH, client tracking) when it is closed; the module calls
   SignalModifiedKey() itself where it writes (Redis 6.2+). */
#define REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED (1 << 1)

/* ---- Command info and key specs (SetCommandInfo(), since 7.0) --------------- */

/* A key spec's flags: how the command uses the keys it names. */
#define REDISMODULE_CMD_KEY_RO (1ULL << 0)
#define REDISMODULE_CMD_KEY_RW (1ULL << 1)
#define REDISMODULE_CMD_KEY_OW (1ULL << 2)
#define REDISMODULE_CMD_KEY_RM (1ULL << 3)
#define REDISMODULE_CMD_KEY_ACCESS (1ULL << 4)
#define REDISMODULE_CMD_KEY_UPDATE (1ULL << 5)
#define REDISMODULE_CMD_KEY_INSERT (1ULL << 6)
#define REDISMODULE_CMD_KEY_DELETE (1ULL << 7)
#define REDISMODULE_CMD_KEY_NOT_KEY (1ULL << 8)
#define REDISMODULE_CMD_KEY_INCOMPLETE (1ULL << 9)
#define REDISMODULE_CMD_KEY_VARIABLE_FLAGS (1ULL << 10)

/* Where the search for keys begins (0 ends a list of key specs). */
typedef enum RedisModuleKeySpecBeginSearchType {
    REDISMODULE_KSPEC_BS_INVALID = 0,
    REDISMODULE_KSPEC_BS_UNKNOWN,
    REDISMODULE_KSPEC_BS_INDEX,
    REDISMODULE_KSPEC_BS_KEYWORD
} RedisModuleKeySpecBeginSearchType;

/* How the keys are found from there. */
typedef enum RedisModuleKeySpecFindKeysType {
    REDISMODULE_KSPEC_FK_OMITTED = 0,
    REDISMODULE_KSPEC_FK_UNKNOWN,
    REDISMODULE_KSPEC_FK_RANGE,
    REDISMODULE_KSPEC_FK_KEYNUM
} RedisModuleKeySpecFindKeysType;

typedef struct RedisModuleCommandKeySpec {
    const char *notes;
    uint64_t flags; /* REDISMODULE_CMD_KEY_* */
    RedisModuleKeySpecBeginSearchType begin_search_type;
    union {
        struct {
            int pos; /* argv index of the first key */
        } index;
        struct {
            const char *keyword; /* keys follow this argument */
            int startfrom;       /* where to look for it (< 0: from the end) */
        } keyword;
    } bs;
    RedisModuleKeySpecFindKeysType find_keys_type;
    union {
        struct {
            int lastkey; /* relative to the first key; -1: up to the last arg */
            int keystep;
            int limit;
        } range;
        struct {
            int keynumidx;
            int firstkey;
            int keystep;
        } keynum;
    } fk;
} RedisModuleCommandKeySpec;

typedef enum RedisModuleCommandArgType {
    REDISMODULE_ARG_TYPE_STRING,
    REDISMODULE_ARG_TYPE_INTEGER,
    REDISMODULE_ARG_TYPE_DOUBLE,
    REDISMODULE_ARG_TYPE_KEY,
    REDISMODULE_ARG_TYPE_PATTERN,
    REDISMODULE_ARG_TYPE_UNIX_TIME,
    REDISMODULE_ARG_TYPE_PURE_TOKEN,
    REDISMODULE_ARG_TYPE_ONEOF,
    REDISMODULE_ARG_TYPE_BLOCK
} RedisModuleCommandArgType;

typedef struct RedisModuleCommandArg {
    const char *name;
    RedisModuleCommandArgType type;
    int key_spec_index;
    const char *token;
    const char *summary;
    const char *since;
    int flags;
    const char *deprecated_since;
    struct RedisModuleCommandArg *subargs;
    const char *display_text;
} RedisModuleCommandArg;

typedef struct RedisModuleCommandHistoryEntry {
    const char *since;
    const char *changes;
} RedisModuleCommandHistoryEntry;

/* The versioned header of a command info: the server reads the arrays
   below with these element sizes. */
typedef struct RedisModuleCommandInfoVersion {
    int version;
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} RedisModuleCommandInfoVersion;

#define REDISMODULE_COMMAND_INFO_VERSION_1                          \
    {                                                               \
        .version = 1,                                               \
        .sizeof_historyentry = sizeof(RedisModuleCommandHistoryEntry), \
        .sizeof_keyspec = sizeof(RedisModuleCommandKeySpec),        \
        .sizeof_arg = sizeof(RedisModuleCommandArg)                 \
    }

typedef struct RedisModuleCommandInfo {
    const RedisModuleCommandInfoVersion *version;
    const char *summary;
    const char *complexity;
    const char *since;
    RedisModuleCommandHistoryEntry *history;
    const char *tips;
    int arity; /* -N: at least N */
    RedisModuleCommandKeySpec *key_specs; /* ends with a zeroed spec */
    RedisModuleCommandArg *args;
} RedisModuleCommandInfo;

/* ---- Opaque types ---------------------------------------------------------- */

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleCommand RedisModuleCommand;

typedef long long mstime_t;
typedef long long ustime_t;

typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx,
                                  RedisModuleString **argv, int argc);

/* ---- The functions ---------------------------------------------------------- */

/*
 * X(return type, name without "RedisModule_", parameter list): every
 * function the module calls. The same list declares the pointers (here),
 * defines them and resolves them (api.c).
 */
#define SLUICE__MODULE_API(X)                                                 \
    X(void *, Alloc, (size_t bytes))                                          \
    X(void *, Calloc, (size_t nmemb, size_t size))                            \
    X(void *, Realloc, (void *ptr, size_t bytes))                             \
    X(void, Free, (void *ptr))                                                \
    X(int, CreateCommand, (RedisModuleCtx *ctx, const char *name,             \
                           RedisModuleCmdFunc cmdfunc, const char *strflags,  \
                           int firstkey, int lastkey, int keystep))           \
    X(RedisModuleCommand *, GetCommand, (RedisModuleCtx *ctx,                 \
                                         const char *name))                   \
    X(int, SetCommandInfo, (RedisModuleCommand *command,                      \
                            const RedisModuleCommandInfo *info))              \
    X(void, SetModuleAttribs, (RedisModuleCtx *ctx, const char *name,         \
                               int ver, int apiver))                          \
    X(int, IsModuleNameBusy, (const char *name))                              \
    X(RedisModuleString *, CreateString, (RedisModuleCtx *ctx,                \
                                          const char *ptr, size_t len))       \
    X(RedisModuleString *, CreateStringFromLongLong, (RedisModuleCtx *ctx,    \
                                                      long long ll))          \
    X(RedisModuleString *, CreateStringPrintf, (RedisModuleCtx *ctx,          \
                                                const char *fmt, ...))        \
    X(void, FreeString, (RedisModuleCtx *ctx, RedisModuleString *str))        \
    X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len)) \
    X(int, StringToLongLong, (const RedisModuleString *str, long long *ll))   \
    X(int, StringToDouble, (const RedisModuleString *str, double *d))         \
    X(int, ReplyWithError, (RedisModuleCtx *ctx, const char *err))            \
    X(int, ReplyWithLongLong, (RedisModuleCtx *ctx, long long ll))            \
    X(int, ReplyWithArray, (RedisModuleCtx *ctx, long len))                   \
    X(int, ReplyWithSimpleString, (RedisModuleCtx *ctx, const char *msg))     \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx *ctx, const char *buf,      \
                                   size_t len))                               \
    X(int, ReplyWithNull, (RedisModuleCtx *ctx))                              \
    X(int, WrongArity, (RedisModuleCtx *ctx))                                 \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx *ctx,                        \
                                  RedisModuleString *keyname, int mode))      \
    X(void, CloseKey, (RedisModuleKey *key))                                  \
    X(int, KeyType, (RedisModuleKey *key))                                    \
    X(size_t, ValueLength, (RedisModuleKey *key))                             \
    X(int, DeleteKey, (RedisModuleKey *key))                                  \
    X(int, UnlinkKey, (RedisModuleKey *key))                                  \
    X(mstime_t, GetExpire, (RedisModuleKey *key))                             \
    X(int, SetExpire, (RedisModuleKey *key, mstime_t expire))                 \
    X(mstime_t, GetAbsExpire, (RedisModuleKey *key))                          \
    X(int, SetAbsExpire, (RedisModuleKey *key, mstime_t expire))              \
    X(int, StringSet, (RedisModuleKey *key, RedisModuleString *str))          \
    X(char *, StringDMA, (RedisModuleKey *key, size_t *len, int mode))        \
    X(int, StringTruncate, (RedisModuleKey *key, size_t newlen))              \
    X(int, ZsetAdd, (RedisModuleKey *key, double score,                       \
                     RedisModuleString *ele, int *flagsptr))                  \
    X(int, ZsetRem, (RedisModuleKey *key, RedisModuleString *ele,             \
                     int *deleted))                                           \
    X(int, ZsetScore, (RedisModuleKey *key, RedisModuleString *ele,           \
                       double *score))                                        \
    X(int, ZsetFirstInScoreRange, (RedisModuleKey *key, double min,           \
                                   double max, int minex, int maxex))         \
    X(int, ZsetLastInScoreRange, (RedisModuleKey *key, double min,            \
                                  double max, int minex, int maxex))          \
    X(RedisModuleString *, ZsetRangeCurrentElement, (RedisModuleKey *key,     \
                                                     double *score))          \
    X(int, ZsetRangeNext, (RedisModuleKey *key))                              \
    X(int, ZsetRangePrev, (RedisModuleKey *key))                              \
    X(int, ZsetRangeEndReached, (RedisModuleKey *key))                        \
    X(void, ZsetRangeStop, (RedisModuleKey *key))                             \
    X(int, HashGet, (RedisModuleKey *key, int flags, ...))                    \
    X(int, HashSet, (RedisModuleKey *key, int flags, ...))                    \
    X(int, Replicate, (RedisModuleCtx *ctx, const char *cmdname,              \
                       const char *fmt, ...))                                 \
    X(RedisModuleCallReply *, Call, (RedisModuleCtx *ctx,                     \
                                     const char *cmdname, const char *fmt,    \
                                     ...))                                    \
    X(int, CallReplyType, (RedisModuleCallReply *reply))                      \
    X(long long, CallReplyInteger, (RedisModuleCallReply *reply))             \
    X(size_t, CallReplyLength, (RedisModuleCallReply *reply))                 \
    X(RedisModuleCallReply *, CallReplyArrayElement,                          \
      (RedisModuleCallReply *reply, size_t idx))                              \
    X(const char *, CallReplyStringPtr, (RedisModuleCallReply *reply,         \
                                         size_t *len))                        \
    X(void, FreeCallReply, (RedisModuleCallReply *reply))                     \
    X(long long, Milliseconds, (void))                                        \
    X(void, Log, (RedisModuleCtx *ctx, const char *level, const char *fmt,    \
                  ...))                                                       \
    X(int, GetContextFlags, (RedisModuleCtx *ctx))                            \
    X(void, KeyAtPos, (RedisModuleCtx *ctx, int pos))                         \
    X(int, IsKeysPositionRequest, (RedisModuleCtx *ctx))                      \
    X(int, NotifyKeyspaceEvent, (RedisModuleCtx *ctx, int type,               \
                                 const char *event, RedisModuleString *key))  \
    X(int, SignalModifiedKey, (RedisModuleCtx *ctx,                           \
                               RedisModuleString *keyname))                   \
    X(void, SetModuleOptions, (RedisModuleCtx *ctx, int options))

/*
 * The same for functions a server may lack: each pointer is NULL where it
 * does (Microseconds came with 7.2: Debian's 7.0 has none).
 */
#define SLUICE__MODULE_API_OPTIONAL(X) \
    X(ustime_t, Microseconds, (void))

#define SLUICE__MODULE_API_DECLARE(ret, name, params) \
    extern ret(*RedisModule_##name) params;
SLUICE__MODULE_API(SLUICE__MODULE_API_DECLARE)
SLUICE__MODULE_API_OPTIONAL(SLUICE__MODULE_API_DECLARE)
#undef SLUICE__MODULE_API_DECLARE

/*
 * Resolves every function of SLUICE__MODULE_API through the server's
 * RedisModule_GetApi (the first word of 'ctx') and registers the module as
 * 'name', version 'ver'. Answers REDISMODULE_OK; REDISMODULE_ERR when the
 * name is taken or the server lacks a function (logged, by name).
 */
int sluice__module_api_init(RedisModuleCtx *ctx, const char *name, int ver);

#endif /* SLUICE_MODULE_REDISMODULE_API_H */
