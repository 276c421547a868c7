/*
 * gcra.h - gcra's state, shared by its pure code (gcra.c) and its module
 * glue (module.c), which reads it from the key that gcra.lua writes and
 * decides with sluice__algo_gcra.decide().
 */
#ifndef SLUICE_ALGO_GCRA_H
#define SLUICE_ALGO_GCRA_H

#include <stdint.h>

/* TAT x max = tat_ms x max + rem: see gcra.c. */
typedef struct sluice__gcra_state {
    uint64_t tat_ms; /* TAT's whole ms; 0 and 0: fresh */
    uint64_t rem;    /* TAT's remainder, in 1/max ms */
} sluice__gcra_state;

#endif /* SLUICE_ALGO_GCRA_H */
