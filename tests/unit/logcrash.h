/* The log's crash campaign (test-log-crash.c): a run (logcrash-run.c),
 * on the devices and power switch of log-helpers.h, checked by the
 * campaigns' oracle (oracle.h).
 */
#ifndef HHC_TEST_LOGCRASH_H
#define HHC_TEST_LOGCRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log-helpers.h"

#include "oracle.h"

/* ---- a run (logcrash-run.c) ---- */

struct run {
  uint64_t seed, rng;
  uint64_t nblocks;
  uint32_t nslots;
  unsigned nlogs;
  uint64_t log_size;
  struct power pw;
  struct membackend *mb;
  struct pbe be;
  struct tdev ssd, logs[2];
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
  struct model m;
  uint64_t op; /* version counter */
  unsigned char *buf;
  const char *phase; /* atomic: the watchdog reads it */
  char cfg[200];     /* the run's configuration, for messages */
  /* No backend outages: the only log mirror is to fail, and a FLUSH
   * that falls back to write-back then fails with the backend.
   */
  bool no_outages;
  unsigned faulty; /* the mirror whose fault the cut waits for */
  /* what happened, for the summary */
  uint64_t nwrites, nflushes;
};

/* The run fails: the message with its seed, phase and configuration. */
#define RFAIL(r, ...)                                                          \
  do                                                                           \
    {                                                                          \
      char msg_[400];                                                          \
      snprintf (msg_, sizeof msg_, __VA_ARGS__);                               \
      tfail ("seed %llu (%s; %s): %s", (unsigned long long)(r)->seed,          \
             get_phase (r), (r)->cfg, msg_);                                   \
    }                                                                          \
  while (0)

/* What the run is doing, for messages (and the watchdog). */
void set_phase (struct run *r, const char *phase);
const char *get_phase (struct run *r);

/* A new SSD of nslots slots (in place of the last one). */
void new_ssd (struct run *r, uint32_t nslots);
/* hhc_open and hhc_start; hhc_close. */
void run_open (struct run *r);
void run_close (struct run *r);
/* A block, in one of the first 24 half the time. */
uint64_t pick_lba (struct run *r);
/* Write sectors [first_sec, +nsec) (may span blocks). */
void do_write (struct run *r, uint64_t first_sec, uint64_t nsec, bool fua);
/* FLUSH, or hhc_drain if drain. */
void do_flush (struct run *r, bool drain);
/* nops random operations, or fewer if the power fails. */
void workload (struct run *r, int nops);
/* Every sector of the volume (through reads) or of the backend. */
void verify_all (struct run *r, bool backend, const char *what);

#endif /* HHC_TEST_LOGCRASH_H */
