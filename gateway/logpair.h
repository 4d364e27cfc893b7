/* The cache's HDD log at open: pairing and retiring (logpair.c). */
#ifndef HHC_LOGPAIR_H
#define HHC_LOGPAIR_H

#include <stdbool.h>

struct hhc_volume;

/* Mode hhc: open the log and decide what it means for the cache.
 * cache_new: the cache is about to be formatted (a valid log of this
 * backend is replayed at start).  A loaded cache needs the log it is
 * paired with, or a blank one.  0 or errno (logged).
 */
int logpair_open (struct hhc_volume *vol, bool cache_new);
/* A mode other than hhc on a loaded cache used in hhc: refused unless
 * log= names its log, which hhc_start then voids (retire_pending).
 */
int logpair_check_retire (struct hhc_volume *vol);
/* In hhc_start: write every dirty block back, void the log and record
 * in the state page that no log is paired.
 */
int logpair_retire (struct hhc_volume *vol, void *bctx);
/* Record in the cache (state page, written later by the open) which
 * log, if any, this run pairs it with.
 */
void logpair_link (struct hhc_volume *vol);
/* Mode hhc, after the load (state: what the last run left): is the
 * log given older than the one this cache last ran with (a mirror left
 * out of a later run, given alone)?  Refused (EINVAL, logged, nothing
 * written) when the last run's log is to be redone into the cache
 * (it would undo FLUSHed writes); else a warning: the cache holds
 * everything, and its dirty blocks are written to the log at start.
 */
int logpair_stale (struct hhc_volume *vol, int state);
/* Mode hhc, in the state page settle_after_load writes before any I/O:
 * the epoch this start's mark will take, above every one the mirrors
 * given hold and every one reserved before, so that a start cut while
 * its mark reached only some mirrors never lets a later start take the
 * same epoch (found by review).
 */
void logpair_reserve_epoch (struct hhc_volume *vol);
/* At start, after the re-log: the reserved epoch's first superblock
 * on every mirror given, recorded in the state page (logpair_stale's
 * reference).
 */
int logpair_record_gen (struct hhc_volume *vol);
/* format=force in mode hhc: what the cache formatted over knew of its
 * log (logpair_read_old, before the format), and the check that the
 * log given, which is replayed into the backend, is not stale against
 * it (logpair_check_old, after logpair_open): refused (EINVAL, said
 * why), or with log-lost=accept not replayed.
 */
struct logpair_old {
  bool known;
  uint8_t uuid[16], linked_log[16];
  uint64_t log_gen;
};
void logpair_read_old (struct hhc_volume *vol, struct logpair_old *old);
int logpair_check_old (struct hhc_volume *vol, const struct logpair_old *old);
/* format=force in a mode other than hhc over a cache used in hhc: void
 * its log first (log= must name it), else refuse.
 */
int logpair_retire_before_format (struct hhc_volume *vol);

#endif /* HHC_LOGPAIR_H */
