/* Shared by the tests of the log's epochs and of its retirement
 * (test-log-epoch.c, test-log-retire.c): starts given a set of
 * mirrors, refused starts, superblock epochs.
 */
#ifndef HHC_EPOCH_HELPERS_H
#define HHC_EPOCH_HELPERS_H

#include <stdint.h>

#include "log-helpers.h"

/* Give the start the mirrors of mask (bit i: e->logs[i]). */
void give (struct env *e, unsigned mask);
/* The generation of the newest valid superblock on crash device cd,
 * and its epoch.
 */
uint64_t sb_gen (struct hhc_dev *cd);
uint64_t sb_epoch (struct hhc_dev *cd);
/* A start given the mirrors of mask must be refused (what: them, for
 * the message; block 3 reads v2 or v1 if it is not).
 */
void refused (struct env *e, unsigned mask, const char *what);
/* A run: start, block 3 = v, FLUSH, clean stop. */
void run_v (struct env *e, uint64_t v);
/* Writes the SSD has taken. */
uint64_t ssd_writes (struct env *e);
/* A start given the mirrors of mask whose SSD fails at its last write
 * (the state page that records the mark, or the retirement): counted
 * on a start of the same devices first, which is then undone.
 */
void start_dies_at_last_write (struct env *e, unsigned mask);

#endif /* HHC_EPOCH_HELPERS_H */
