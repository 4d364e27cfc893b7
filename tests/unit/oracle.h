/* The crash campaigns' oracle (oracle.c): what each 512-byte sector of
 * a volume may hold after a crash, from every version written to it
 * (pattern_fill's versioned sectors), the last completed FLUSH, and
 * trims not yet covered by one.  Used by test-crashdev.c and the log's
 * campaign (test-log-crash.c).
 */
#ifndef HHC_TEST_ORACLE_H
#define HHC_TEST_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef ZERO_FLAG
#define ZERO_FLAG (UINT64_C (1) << 63) /* a version that wrote zeros */
#endif

struct hist {
  uint64_t *v; /* versions written, oldest first; ZERO_FLAG|n = zeros */
  uint32_t n, cap;
};

struct model {
  uint64_t nsec;
  uint32_t spb; /* sectors per block */
  struct hist *h;
  uint64_t *latest;  /* newest entry per sector */
  uint64_t *flushed; /* minimum (op number) a crash may leave */
  bool *trimmed;     /* a trim not yet covered by a flush */
};

/* The op number of a version (ZERO_FLAG cleared). */
uint64_t opnum (uint64_t v);
/* nsec sectors, spb to a block, none written yet. */
void model_init (struct model *m, uint64_t nsec, uint32_t spb);
void model_free (struct model *m);
/* Sector sec was written with version v (ZERO_FLAG|n: zeroed). */
void model_set (struct model *m, uint64_t sec, uint64_t v);
/* A FLUSH completed: every sector's newest version is durable. */
void model_flush_all (struct model *m);
/* Is this sector content acceptable for sector sec after a crash? If
 * not, why says what it holds.
 */
bool model_ok (const struct model *m, uint64_t sec, const unsigned char *data,
               char *why, size_t whylen);

#endif /* HHC_TEST_ORACLE_H */
