/* The fixture of the pipeline tests (test-log-pipeline,
 * test-log-pipeline-sync): a log on crash devices, each behind a
 * "gate" device that can hold the write of one segment, counts writes
 * in progress and offers FUA or not; and what a replay of it writes.
 */
#ifndef HHC_TEST_LOGPIPE_H
#define HHC_TEST_LOGPIPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devcrash.h"
#include "log.h"
#include "log_int.h"

#define BS 4096u
#define NKEYS 16
#define SEG 65536u
#define LOG_DEV (LOG_REGION_OFF + 1024 * 1024)
#define MAXM 2

/* ---- the gate device ---- */

struct gdev {
  struct hhc_dev dev; /* first */
  struct hhc_dev *inner;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t hold_seq; /* a write of this segment waits (0: none) */
  bool held;         /* one waits */
  int release_err;   /* it then fails so (0: it is forwarded) */
  unsigned active, max_active;
  uint64_t fua_writes, syncs;
  int sync_fail_once; /* the next sync fails so, later ones do not */
  uint64_t done_seq[256], done_off[256]; /* segment writes done */
  unsigned ndone;
};

/* ---- a log on gate devices ---- */

struct plog {
  unsigned nm;
  struct hhc_dev *cd[MAXM];
  struct gdev gd[MAXM];
  struct hhc_dev *devs[MAXM];
  struct hhc_log *log;
  unsigned inflight;
  unsigned char blocks[NKEYS][BS];
};

/* Open t's log: online (to write it), else offline (to replay or
 * inspect it); *found says what log_open found.
 */
struct hhc_log *plog_open_log (struct plog *t, bool online,
                               enum log_found *found);
/* A blank log of nm mirrors, inflight segments in flight, on gate
 * devices with FUA or not: opened, started and rebased.
 */
struct plog *plog_new (unsigned nm, unsigned inflight, bool fua);
void plog_free (struct plog *t);
/* Append block key (at LBA key), every byte v. */
void put_block (struct plog *t, uint32_t key, unsigned char v);

/* What a replay writes: per LBA the first byte of the last block. */
extern int first[NKEYS];
int replayed_write (void *opaque, const void *buf, uint64_t lba);

/* For crashdev_crash: no unsynced write survives the cut. */
bool keep_none (size_t i, void *opaque);

#endif /* HHC_TEST_LOGPIPE_H */
