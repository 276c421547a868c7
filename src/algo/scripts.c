/*
 * scripts.c - the table of the algorithms' scripts, each built from its
 * NAME.lua into 'sluice__script_NAME' (CMakeLists.txt). A file of its own,
 * so that what links the algorithms without running their scripts (the
 * server module, which decides in C) holds no Lua text.
 */
#include "algo/algo.h"

const sluice__script *const sluice__algo_scripts[SLUICE__ALGO_N] = {
#define SLUICE__ALGO_ENTRY(name, val, folder) \
    [SLUICE_##name] = &sluice__script_##folder,
    SLUICE_ALGO_MAP(SLUICE__ALGO_ENTRY)
#undef SLUICE__ALGO_ENTRY
};
