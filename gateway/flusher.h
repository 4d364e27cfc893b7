/* Background write-back of dirty blocks (docs/design.md §6).
 *
 * One thread selects the oldest dirty blocks, reads them from the SSD,
 * sorts them by LBA and coalesces them into extents that never cross
 * the backend's preferred block size; writeback_threads workers write
 * the extents at once; then the backend is flushed and each block is
 * marked clean unless it was rewritten meanwhile (ACT_REDIRTY) or a
 * trim/zero passed down meanwhile.
 *
 * Pace: nothing below dirty-low (unless idle or draining), batches with
 * pauses between dirty-low and dirty-high, back to back above.  The
 * same thread keeps the free-slot pool above its low-water mark.
 */
#ifndef HHC_FLUSHER_H
#define HHC_FLUSHER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct hhc_volume;

struct hhc_flusher {
  struct hhc_volume *vol;
  void *bctx; /* background backend context */
  pthread_t thread;
  bool running;

  pthread_mutex_t lock; /* protects the fields below */
  pthread_cond_t cond;  /* kicks the flusher thread */
  pthread_cond_t done;  /* a batch or drain finished */
  bool stop;
  bool kicked;
  unsigned draining; /* callers of flusher_drain waiting */
  uint64_t batches;  /* completed batches */
  int last_err;      /* error of the last batch */
};

/* Start the thread and workers using backend context bctx. */
int flusher_start (struct hhc_flusher *f, struct hhc_volume *vol, void *bctx);
/* Stop them (the current batch completes). */
void flusher_stop (struct hhc_flusher *f);
/* Wake the flusher (dirty watermark crossed, free pool low). */
void flusher_kick (struct hhc_flusher *f);
/* Write back one batch synchronously from the calling thread with bctx;
 * returns blocks cleaned (>= 0) or -errno.
 */
long flusher_batch (struct hhc_volume *vol, void *bctx, unsigned nthreads);
/* FLUSH in wbflush (or hhc without a healthy log), hhc_drain and the
 * start-up's rebase: write back every dirty block from the calling
 * thread with bctx; the backend is flushed by each batch.  EIO if the
 * cache device failed; the error of the third failed batch.
 */
int flusher_writeback_all (struct hhc_volume *vol, void *bctx);

#endif /* HHC_FLUSHER_H */
