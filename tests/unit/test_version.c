/*
 * test_version.c - the library's version at run time is the header's.
 *
 *   - sluice_version() is SLUICE_VERSION, and the same text as
 *     SLUICE_VERSION_MAJOR.MINOR.PATCH;
 *   - sluice_version_number() is SLUICE_VERSION_NUMBER, which is
 *     MAJOR * 10000 + MINOR * 100 + PATCH;
 *   - both are the same on every call (a static answer).
 */
#include "test.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    char text[32];
    const char *v = sluice_version();

    CHECK(v != NULL);
    CHECK(v != NULL && strcmp(v, SLUICE_VERSION) == 0);
    snprintf(text, sizeof(text), "%d.%d.%d", SLUICE_VERSION_MAJOR,
             SLUICE_VERSION_MINOR, SLUICE_VERSION_PATCH);
    CHECK(strcmp(text, SLUICE_VERSION) == 0);
    CHECK(v == sluice_version());

    CHECK_EQ_U64((uint64_t)sluice_version_number(),
                 (uint64_t)SLUICE_VERSION_NUMBER);
    CHECK_EQ_U64((uint64_t)SLUICE_VERSION_NUMBER,
                 (uint64_t)(SLUICE_VERSION_MAJOR * 10000 +
                            SLUICE_VERSION_MINOR * 100 +
                            SLUICE_VERSION_PATCH));
    CHECK(SLUICE_VERSION_MINOR < 100 && SLUICE_VERSION_PATCH < 100);
    return test_summary("test_version");
}
