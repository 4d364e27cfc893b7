/* Shared by logpair.c and logpair-check.c: what the log given at open
 * says about a loaded cache (logpair-check.c).  Internal to the core.
 */
#ifndef HHC_LOGPAIR_INT_H
#define HHC_LOGPAIR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hhc_volume;
struct hhc_cache;
struct log_conf;

static inline bool
uuid_is_zero (const uint8_t u[16])
{
  static const uint8_t z[16];
  return memcmp (u, z, 16) == 0;
}

/* "a.log, b.log": the mirrors given (log=), for a message. */
void logpair_names (struct hhc_volume *vol, char *buf, size_t len);
/* The record a cache starts from when it pairs with a log: the log's
 * newest epoch as found.
 */
uint64_t record_floor (struct hhc_volume *vol);
/* The newest epoch of its log this cache knows of (reservation or
 * record; 0: none).
 */
uint64_t known_epoch (const struct hhc_cache *c);
/* A loaded cache older than a run its log shows: refused (EINVAL,
 * logged) before anything is written.
 */
int behind_log (struct hhc_volume *vol, const struct log_conf *lc);
/* The same check for any caller (hhcctl check: offline.c): the cache
 * cache_uuid, called name in the message, which last ran with
 * linked_log, knows of runs up to known and recorded its last at
 * record (epochs), given lc's mirrors.
 */
int logpair_behind (const struct log_conf *lc, const char *name,
                    const uint8_t cache_uuid[16], const uint8_t linked_log[16],
                    uint64_t known, uint64_t record);
/* Read the state page: is a redo owed (vol->redo_owed)?  Sets
 * lc->no_format when a blank log must not be formatted.
 */
int note_redo_owed (struct hhc_volume *vol, struct log_conf *lc);
/* A log that cannot give the redo owed: EINVAL (said why with what),
 * or with log-lost=accept 0 (log_lost); 0 when none is owed.
 */
int no_redo (struct hhc_volume *vol, const char *what);
/* The replay of the log this new cache was formatted for is not done
 * (and no log-lost=accept): true, logged.
 */
bool replay_unfinished (struct hhc_volume *vol);
/* The cache's log is not the one given (blank): 0 (warned), or EINVAL
 * (replay_unfinished).
 */
int log_gone (struct hhc_volume *vol, const char *luuid_str);
/* A replay of a chain older than a void of its log: EINVAL (logged),
 * or 0 (none, or not replayed with log-lost=accept).
 */
int voided_since (struct hhc_volume *vol);
/* A valid log next to a loaded cache (a: its UUID, for messages): 0
 * (paired, replay_pending set for an interrupted recovery) or EINVAL
 * (logged; the log closed).
 */
int pair_valid (struct hhc_volume *vol, const uint8_t luuid[16],
                const uint8_t lcache[16], const char *a);

#endif /* HHC_LOGPAIR_INT_H */
