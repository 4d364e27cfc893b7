/* One-head HDD timing model for the benchmarks (issue 32): see
 * hdd-model.c for what it charges.  Not thread-safe: the caller
 * serialises calls (the plugin holds its model lock).
 */
#ifndef HHC_BENCH_HDD_MODEL_H
#define HHC_BENCH_HDD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

/* Request kinds the model serves. */
enum hdd_op { HDD_READ, HDD_WRITE, HDD_FLUSH };

struct hdd_params {
  uint64_t rotation_ns; /* a barrier's rotational wait (half a turn) */
  uint64_t seek_ns;     /* a non-sequential access's seek */
  uint64_t bandwidth;   /* media transfer, bytes per second (> 0) */
  uint64_t cache_bytes; /* volatile write cache size */
};

struct hdd_model {
  struct hdd_params p;
  uint64_t free_at; /* ns: the head has finished everything queued */
  uint64_t dirty;   /* bytes in the volatile cache, not on the media */
  uint64_t pos;     /* byte after the last access (the head's place) */
  bool have_pos;    /* false until the first access */
};

/* One request's charge; times in ns on the caller's clock. */
struct hdd_service {
  uint64_t start;    /* the head takes the request */
  uint64_t finish;   /* the request completes */
  uint64_t seek;     /* seek charged (non-sequential access) */
  uint64_t transfer; /* media transfer charged (reads, cache overflow) */
  uint64_t barrier;  /* rotation + destage of the cache (FLUSH, FUA) */
  uint64_t dirty;    /* cache bytes after the request */
};

/* Starts a model with the given parameters, idle, cache empty. */
void hdd_model_init (struct hdd_model *m, const struct hdd_params *p);

/* Serves one request arriving at NOW (ns): returns its charge and
 * advances the model.  FUA applies to HDD_WRITE only. */
struct hdd_service hdd_model_serve (struct hdd_model *m, uint64_t now,
                                    enum hdd_op op, uint64_t offset,
                                    uint64_t len, bool fua);

/* Time to move LEN bytes at the model's bandwidth, ns. */
uint64_t hdd_model_transfer_ns (const struct hdd_model *m, uint64_t len);

#endif /* HHC_BENCH_HDD_MODEL_H */
