/* Backend flushes: every one goes through these (bflush.c, which
 * explains the tickets and the sticky failure).  The state is in
 * struct hhc_volume (bf_*, be_*); bf_lock is taken with no other lock
 * held.
 */
#ifndef HHC_BFLUSH_H
#define HHC_BFLUSH_H

#include <stdint.h>

struct hhc_volume;

/* A backend flush begins: returns its ticket and reads be_flushed
 * into *flushed.
 */
uint64_t bflush_begin (struct hhc_volume *vol, uint64_t *flushed);
/* It ended with err (0 or errno): a failure that may have dropped a
 * passdown that ended (or a pt/wt write) sets be_failed; one that ran
 * meanwhile is judged at its end (bflush_owed).
 */
void bflush_end (struct hhc_volume *vol, uint64_t ticket, int err,
                 uint64_t flushed);
/* Wait until every backend flush begun so far has ended. */
void bflush_wait (struct hhc_volume *vol);
/* bflush_wait, then EIO if be_failed is set. */
int bflush_settle (struct hhc_volume *vol);
/* How many backend flushes have failed so far. */
uint64_t bflush_failures (struct hhc_volume *vol);
/* A passdown that began when bflush_failures was failures ended and
 * is owed: count it in be_written, and set be_failed if a backend
 * flush failed since it began.
 */
void bflush_owed (struct hhc_volume *vol, uint64_t failures);
/* A backend flush that began when be_written was w succeeded and
 * covers every connection (multi-conn): raise be_flushed to w.
 */
void bflush_done (struct hhc_volume *vol, uint64_t w);
/* begin, ops->flush, end. */
int bflush_run (struct hhc_volume *vol, void *bctx);

#endif /* HHC_BFLUSH_H */
