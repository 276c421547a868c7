/*
 * test_valkey_urls.c - the Valkey store's URLs and options, checked when
 * the store is opened (it connects only on its first call, so no server
 * runs): each malformed URL is refused with SLUICE_EURL or SLUICE_EINVAL
 * and a message that names what is wrong, never the password; valid ones
 * open (schemes in any case); prefixes and the pool size from the options
 * struct are checked the same way. A fuzzer builds thousands of malformed
 * URLs with a user name and a password somewhere before their last '@':
 * no message may quote either.
 *
 * Usage: test_valkey_urls [SEED] (or SLUICE_TEST_SEED=N); the seed is
 * printed.
 */
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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
    "VALKEY://127.0.0.1",
    "Redis://h:7/1",
    "Valkey+Cluster://h1,h2",
    "REDIS+CLUSTER://h1",
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

/* A message never shows the password, nor the user name. */
static void test_secrets(void)
{
    static const struct {
        const char *url;
        const char *shown; /* what the message quotes */
    } secret_urls[] = {
        {"redis://:hunter2@127.0.0.1:99999", "'redis://***@127.0.0.1:99999'"},
        {"redis://alice7:hunter2@127.0.0.1?bogus=1", "redis://***@"},
        {"valkey://alice7:hunter2@?timeout=1", "valkey://***@?"},
        {"redis://alice7:hunter2@127.0.0.1/x", "redis://***@127"},
        {"valkey:/alice7:hunter2@127.0.0.1://", "'valkey:/***@127.0.0.1://'"},
        {"VALKEY:alice7:hunter2@h://", "'VALKEY:***@h://'"},
        {"alice7:hunter2@127.0.0.1", "'***@127.0.0.1'"},
        {"http://alice7:hunter2@127.0.0.1", "'***@127.0.0.1'"},
        {"redis://alice7:hun/ter2@h/0?x@y", "'redis://***@y'"},
        {"redis://h?alice7:hunter2@x", "'redis://***@x'"},
    };
    sluice_store *st = NULL;

    for (size_t i = 0; i < sizeof(secret_urls) / sizeof(secret_urls[0]);
         i++) {
        const char *msg;

        test_context("no userinfo in the message of '%s'", secret_urls[i].url);
        CHECK(sluice_store_open(&st, secret_urls[i].url, NULL) < 0);
        msg = sluice_last_error();
        if (!CHECK(strstr(msg, "hunter") == NULL &&
                   strstr(msg, "alice") == NULL &&
                   strstr(msg, secret_urls[i].shown) != NULL))
            fprintf(stderr, "    message: %s\n", msg);
    }
    test_context(NULL);
}

/* ---- The fuzzer -------------------------------------------------------- */

static const char *const fz_schemes[] = {
    "valkey://", "VALKEY://", "Redis+Cluster://", "redis://", "valkey:/",
    "valkey:", "valkey", "", "http://", "valkey:///", "mem://", "redis//",
    "valkey+cluster:", "://", "valkey+cluster://h,", "redis:/x",
};
/* Where the user ("alice7") and password ("hunter2") go: U and P. */
static const char *const fz_userinfo[] = {
    "U:P", ":P", "U", "P", "U:P/x", "U:P?x=1", "U:%zzP", "U:P#", "U:P:P",
    "U@P", "U:P@P", "/U:P", "?U:P", "U:P,h", "[U:P", "U:P%", "U%3AP",
    "U:P?timeout=0", "x?prefix=U:P",
};
static const char *const fz_tails[] = {
    "127.0.0.1", "h:6379", "", "[::1", "h:99999", "h/x", "h?bogus=1", "h://",
    "h,h2", "h?timeout=0", "h/0?pool=0", "h#frag", "h:0", "h?prefix=%zz",
    "h?prefix=a{", ":6379", "h?engine", "h/-1", "h:65a",
};

/* Appends 'text' with U and P spelt out to url[0..*n), within 'cap'. */
static void fz_put(char *url, size_t *n, size_t cap, const char *text)
{
    for (; *text != '\0'; text++) {
        const char *piece = *text == 'U' ? "alice7" : *text == 'P' ? "hunter2"
                                                                   : NULL;
        size_t len = piece != NULL ? strlen(piece) : 1;

        if (*n + len + 1 >= cap)
            return;
        memcpy(url + *n, piece != NULL ? piece : text, len);
        *n += len;
        url[*n] = '\0';
    }
}

/* A malformed URL with both secrets before its last '@'. */
static void fz_url(char *url, size_t cap)
{
    static const char junk[] = "/?#:@,[]%&=x1";
    size_t n = 0, k;

    url[0] = '\0';
    fz_put(url, &n, cap, fz_schemes[rng_below(sizeof(fz_schemes) /
                                              sizeof(fz_schemes[0]))]);
    for (k = rng_below(3); k > 0; k--) {
        char c[2] = {junk[rng_below(sizeof(junk) - 1)], '\0'};

        fz_put(url, &n, cap, c);
    }
    fz_put(url, &n, cap, fz_userinfo[rng_below(sizeof(fz_userinfo) /
                                               sizeof(fz_userinfo[0]))]);
    for (k = rng_below(4); k > 0; k--) {
        char c[2] = {junk[rng_below(sizeof(junk) - 1)], '\0'};

        fz_put(url, &n, cap, c);
    }
    fz_put(url, &n, cap, "@");
    if (rng_pct(20))
        fz_put(url, &n, cap, "@");
    fz_put(url, &n, cap, fz_tails[rng_below(sizeof(fz_tails) /
                                            sizeof(fz_tails[0]))]);
}

static void test_fuzz_secrets(uint64_t seed)
{
    char url[192];
    int refused = 0;

    rng_state = seed;
    test_context("fuzzed URLs, seed %" PRIu64, seed);
    for (int i = 0; i < 40000; i++) {
        sluice_store *st = NULL;
        const char *msg;

        fz_url(url, sizeof(url));
        if (sluice_store_open(&st, url, NULL) == 0) {
            sluice_store_free(st);
            continue;
        }
        refused++;
        msg = sluice_last_error();
        if (!CHECK(strstr(msg, "hunter2") == NULL &&
                   strstr(msg, "alice7") == NULL)) {
            fprintf(stderr, "    url '%s'\n    message: %s\n", url, msg);
            break;
        }
    }
    test_context(NULL);
    printf("  %d fuzzed URLs refused, none quoting its user or password "
           "(seed %" PRIu64 ")\n", refused, seed);
    CHECK(refused > 30000);
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

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    test_bad_urls();
    test_secrets();
    test_fuzz_secrets(seed);
    test_good_urls();
    return test_summary("test_valkey_urls");
}
