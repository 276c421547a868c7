/*
 * test_valkey_urls.c - the Valkey store's URLs and options, checked when
 * the store is opened (it connects only on its first call, so no server
 * runs): each malformed URL is refused with SLUICE_EURL or SLUICE_EINVAL
 * and a message that names what is wrong, never the password; valid ones
 * open; prefixes and the pool size from the options struct are checked
 * the same way.
 */
#include "test.h"

#include <stdio.h>
#include <string.h>

/* URLs refused, with the code and a word the message must hold. */
static const struct {
    const char *url;
    int rc;
    const char *says; /* a word the message must hold */
} bad[] = {
    {"http://127.0.0.1:6379", SLUICE_EURL, "http"},
    {"redis:/127.0.0.1", SLUICE_EURL, "redis:/"},
    {"valkey//127.0.0.1", SLUICE_EURL, ""},
    {"redis://", SLUICE_EURL, "host"},
    {"redis://:6379", SLUICE_EURL, "host"},
    {"redis://127.0.0.1:0", SLUICE_EURL, "port"},
    {"redis://127.0.0.1:65536", SLUICE_EURL, "port"},
    {"redis://127.0.0.1:99999", SLUICE_EURL, "port"},
    {"redis://127.0.0.1:-1", SLUICE_EURL, "port"},
    {"redis://127.0.0.1:63a9", SLUICE_EURL, "port"},
    {"redis://127.0.0.1:", SLUICE_EURL, "port"},
    {"redis://127.0.0.1/x", SLUICE_EURL, "database"},
    {"redis://127.0.0.1/-1", SLUICE_EURL, "database"},
    {"redis://127.0.0.1?bogus=1", SLUICE_EURL, "bogus"},
    {"redis://127.0.0.1?timeout", SLUICE_EURL, "timeout"},
    {"redis://127.0.0.1?timeout=0", SLUICE_EURL, "timeout"},
    {"redis://127.0.0.1?timeout=abc", SLUICE_EURL, "timeout"},
    {"redis://127.0.0.1?connect_timeout=3600001", SLUICE_EURL,
     "connect_timeout"},
    {"redis://127.0.0.1?pool=0", SLUICE_EURL, "pool"},
    {"redis://127.0.0.1?pool=1025", SLUICE_EURL, "pool"},
    {"redis://127.0.0.1?clock=local", SLUICE_EURL, "clock"},
    {"redis://127.0.0.1?on_error=maybe", SLUICE_EURL, "on_error"},
    {"redis://127.0.0.1?engine=native", SLUICE_EURL, "auto, module or lua"},
    {"redis://127.0.0.1?engine=", SLUICE_EURL, "engine"},
    {"redis://127.0.0.1?engine=LUA", SLUICE_EURL, "engine"},
    {"redis://127.0.0.1?prefix=a%zzb", SLUICE_EURL, "escape"},
    {"redis://127.0.0.1?prefix=a%4", SLUICE_EURL, "escape"},
    {"redis://127.0.0.1?prefix=a%00b", SLUICE_EURL, "escape"},
    {"redis://:se%zzret@127.0.0.1", SLUICE_EURL, "escape"},
    {"redis://user@127.0.0.1", SLUICE_EURL, "password"},
    {"redis://[::1:6379", SLUICE_EURL, "["},
    {"redis://127.0.0.1?prefix=a{b", SLUICE_EINVAL, "brace"},
    {"redis://127.0.0.1?prefix=a}b", SLUICE_EINVAL, "brace"},
    {"redis://127.0.0.1?prefix=a%7Bb", SLUICE_EINVAL, "brace"},
    {"redis://127.0.0.1?prefix=", SLUICE_EINVAL, "non-empty"},
    {"redis://127.0.0.1?emq_prefix=q{", SLUICE_EINVAL, "brace"},
    {"redis://127.0.0.1?emq_prefix=%7D", SLUICE_EINVAL, "brace"},
};

/* URLs that open (without connecting: the servers need not exist). */
static const char *const good[] = {
    "redis://127.0.0.1",
    "valkey://127.0.0.1:6380/2",
    "redis://localhost:1?timeout=1&connect_timeout=3600000&pool=1024",
    "redis://:pw@h?clock=server&on_error=error",
    "redis://u:p%40ss@h:7/15?prefix=a%3Ab&emq_prefix=q&clock=caller",
    "redis://[::1]:6379",
    "redis://h?on_error=closed&on_error=open",
    "redis://h/",
    "redis://h?engine=auto",
    "valkey://h?engine=module",
    "redis+cluster://h1,h2?engine=lua",
};

static void test_bad_urls(void)
{
    sluice_store *st = NULL;

    test_context("store URLs refused");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sluice_store_open(&st, bad[i].url, NULL);

        if (!CHECK_RC(rc, bad[i].rc))
            fprintf(stderr, "    url '%s'\n", bad[i].url);
        CHECK(st == NULL);
        if (!CHECK(sluice_last_error()[0] != '\0' &&
                   strstr(sluice_last_error(), bad[i].says) != NULL))
            fprintf(stderr, "    url '%s': message \"%s\" lacks \"%s\"\n",
                    bad[i].url, sluice_last_error(), bad[i].says);
        sluice_store_free(st);
        st = NULL;
    }
    test_context(NULL);
}

/* A message never shows the password. */
static void test_secrets(void)
{
    static const char *const secret_urls[] = {
        "redis://:hunter2@127.0.0.1:99999",
        "redis://u:hunter2@127.0.0.1?bogus=1",
        "valkey://u:hunter2@?timeout=1",
        "redis://u:hunter2@127.0.0.1/x",
    };
    sluice_store *st = NULL;

    test_context("no password in a message");
    for (size_t i = 0; i < sizeof(secret_urls) / sizeof(secret_urls[0]);
         i++) {
        CHECK_RC(sluice_store_open(&st, secret_urls[i], NULL), SLUICE_EURL);
        if (!CHECK(strstr(sluice_last_error(), "hunter2") == NULL))
            fprintf(stderr, "    message: %s\n", sluice_last_error());
    }
    test_context(NULL);
}

static void test_good_urls(void)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *st = NULL;

    test_context("store URLs that open");
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!CHECK_OK(sluice_store_open(&st, good[i], NULL)))
            fprintf(stderr, "    url '%s'\n", good[i]);
        if (st != NULL)
            CHECK(strncmp(sluice_store_kind(st), "valkey", 6) == 0);
        sluice_store_free(st);
        st = NULL;
    }
    /* Prefixes from the options struct are checked the same way. */
    o.key_prefix = "bad{";
    CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
    o.key_prefix = NULL;
    o.emq_prefix = "}";
    CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
    o.emq_prefix = NULL;
    o.pool_size = 5000;
    CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
    CHECK(st == NULL);
    o.pool_size = 0;
    /* The engine from the options struct: one of the three. */
    o.engine = (sluice_engine)3;
    CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
    CHECK(strstr(sluice_last_error(), "engine") != NULL);
    CHECK(st == NULL);
    o.engine = SLUICE_ENGINE_LUA;
    CHECK_OK(sluice_store_open(&st, "redis://h", &o));
    sluice_store_free(st);
    st = NULL;
    /* A caller of version 2 knows no engine: auto, whatever follows. */
    o.version = 2;
    o.engine = (sluice_engine)99;
    CHECK_OK(sluice_store_open(&st, "redis://h", &o));
    sluice_store_free(st);
    st = NULL;
    test_context(NULL);
}

int main(void)
{
    test_bad_urls();
    test_secrets();
    test_good_urls();
    return test_summary("test_valkey_urls");
}
