/* Counters and a latency histogram, lock-free (atomic adds). */
#ifndef HHC_STATS_H
#define HHC_STATS_H

#include <stdint.h>

/* Log-linear histogram of microseconds: 4 sub-buckets per power of 2. */
#define HIST_BUCKETS (4 * 40)

struct hhc_hist {
  uint64_t b[HIST_BUCKETS];
};

struct hhc_stats {
  uint64_t read_hits, read_misses, write_hits, write_misses;
  uint64_t read_fills; /* blocks read misses and prefetch put in the cache */
  uint64_t bytes_read, bytes_written;
  uint64_t evictions;
  uint64_t writeback_blocks, writeback_errors, writeback_retries;
  uint64_t backend_errors;
  uint64_t flushes;
  uint64_t flush_errors; /* FLUSHes that returned an error */
  uint64_t stalls;
  uint64_t log_fallbacks; /* FLUSHes done as wbflush: no log mirror left */
  struct hhc_hist flush_lat;
};

static inline void
stat_add (uint64_t *c, uint64_t n)
{
  __atomic_fetch_add (c, n, __ATOMIC_RELAXED);
}

static inline uint64_t
stat_get (const uint64_t *c)
{
  return __atomic_load_n (c, __ATOMIC_RELAXED);
}

/* Record one latency in microseconds. */
void hist_add (struct hhc_hist *h, uint64_t us);
/* The q-quantile (0..1) in microseconds (upper edge of its bucket). */
uint64_t hist_quantile (const struct hhc_hist *h, double q);

/* Cumulative counts at power-of-two edges: edges[i] = 2^(i+2) - 1 us
 * and counts[i] = latencies <= edges[i], for i < n (at most
 * HIST_BUCKETS / 4).  A fixed set, as Prometheus wants.
 */
void hist_cumulative (const struct hhc_hist *h, unsigned n, uint64_t *edges,
                      uint64_t *counts);

/* Write text to path atomically (temp file + rename). */
int stats_write_file (const char *path, const char *text);

#endif /* HHC_STATS_H */
