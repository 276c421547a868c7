/*
 * redis_server.h - kept for bench/, which includes it from tests/ and links
 * only the library: the launcher now lives in tests/support/server.{h,c},
 * and this header brings both in, so the one file of a program that
 * includes it gets the launcher whole. Tests link sluice_support instead,
 * and a program may link sluice_launcher (tests/CMakeLists.txt) and include
 * "server.h"; once bench/ does, this file can go.
 */
#ifndef SLUICE_TEST_REDIS_SERVER_H
#define SLUICE_TEST_REDIS_SERVER_H

#include "support/server.h"
#include "support/server.c"

#endif /* SLUICE_TEST_REDIS_SERVER_H */
