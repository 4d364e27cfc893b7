/* The HDD log at start: replay, redo, rebase (logstart.c). */
#ifndef HHC_LOGSTART_H
#define HHC_LOGSTART_H

struct hhc_volume;

/* Mode hhc, in hhc_start before the flusher runs: replay the log into
 * the backend if the cache is new (or redo it into the cache after a
 * crash with ssd-sync=checkpoint), start the log with the volume's
 * callbacks and log every dirty block under a new base barrier.  0 or
 * errno (logged).
 */
int logstart_run (struct hhc_volume *vol, void *bctx);

#endif /* HHC_LOGSTART_H */
