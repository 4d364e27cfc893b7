/* Sequential cutoff (seq-cutoff=SIZE): streams of sequential requests
 * longer than SIZE bypass the cache (docs/design.md §4.8).
 *
 * Detection follows Open CAS's and bcache's idea: a small fixed table
 * of recent streams, each keyed by the offset its next request is
 * expected at.  A request that starts where a stream of its direction
 * (read or write) expects adds its length to the stream; any other
 * starts a stream in an unused entry, else the shortest of the less
 * recently used half (so that random requests do not push a long
 * stream out between two of its requests).  A stream whose
 * accumulated length exceeds the cutoff is sequential, from the
 * request that crosses it on.  No allocation per request.
 *
 *   entry       meaning
 *   len == 0    unused
 *   next        byte after the stream's last request
 *   len         bytes the stream has moved so far (saturating)
 *   used        tick of its last request (which half it is in)
 *
 * What a sequential request does is the request paths' business
 * (read.c: misses are read from the backend and not cached; volume.c:
 * writes go to the backend, see write_direct).
 *
 * Lock: struct hhc_seqcut.lock protects the table; it is taken with no
 * other lock held, and takes none.  The byte counters are atomics.
 */
#ifndef HHC_SEQCUT_H
#define HHC_SEQCUT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define SEQCUT_STREAMS 16 /* streams tracked per volume */

struct hhc_volume;

struct hhc_seqcut {
  uint64_t cutoff;      /* bytes; 0: off (the table is then unused) */
  pthread_mutex_t lock; /* protects tick and stream[] */
  uint64_t tick;
  struct seqcut_stream {
    uint64_t next, len, used;
    bool write;
  } stream[SEQCUT_STREAMS];
  uint64_t read_bytes, write_bytes; /* atomic: bytes that bypassed */
};

/* Set up the table for a cutoff of cutoff bytes (0: off). */
void seqcut_init (struct hhc_seqcut *sc, uint64_t cutoff);
/* Release it. */
void seqcut_destroy (struct hhc_seqcut *sc);
/* Account a request of count bytes at offset; true when its stream is
 * sequential (the request bypasses the cache).  Counts the bytes.
 */
bool seqcut_check (struct hhc_seqcut *sc, uint64_t offset, uint32_t count,
                   bool write);

/* A read that bypasses the cache (pt, or a sequential stream) found
 * block lba not cached (stripe lock not held): read the run of
 * uncached blocks from lba on (at most nmax) from the backend, without
 * filling the cache.  buf gets up to want bytes from byte off of block
 * lba; *done: bytes delivered.
 */
int seqcut_read_run (struct hhc_volume *vol, void *bctx, uint64_t lba,
                     char *buf, uint32_t off, uint32_t want, uint32_t nmax,
                     uint32_t *done);

#endif /* HHC_SEQCUT_H */
