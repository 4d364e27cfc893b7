/* Shared by the log's unit tests (test-log-*.c): devices and a backend
 * behind one power switch, and a volume environment for the directed
 * tests.
 *
 * power: every device (the SSD cache and each log mirror) is a crash
 * device behind a "power" wrapper, and the backend is the in-memory one
 * behind the same wrapper.  A power cut takes a snapshot, atomically
 * across all of them, of what a real power cut at that instant would
 * leave (each device: a seeded random subset of its unsynced writes;
 * the backend: its current bytes, or in some runs only its flushed
 * bytes); the volume then goes on running on the live devices so that
 * no thread can hang on a dead one, is closed, and the snapshot is put
 * back before the restart.
 *
 * env: a volume in mode hhc on such devices (without a power switch
 * unless a test installs one), its backend holding pattern version 0
 * in every block.
 */
#ifndef HHC_TEST_LOG_HELPERS_H
#define HHC_TEST_LOG_HELPERS_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common.h"
#include "membackend.h"
#include "devcrash.h"
#include "flusher.h"
#include "log-format.h"
#include "preopen.h"
#include "reclaim.h"
#include "vol.h"

#define BS 4096u
#define SECTORS (BS / PAT_SECTOR)
#define SEG 65536u
#define ZERO_FLAG (UINT64_C (1) << 63)
#define KiB 1024u
#define MAX_DEVS (1 + HHC_MAX_LOGS)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

extern const char *const log_names[HHC_MAX_LOGS];

/* ---- failures ----
 *
 * In the main thread they are cmocka's; a campaign runs each seed in a
 * thread of its own under a watchdog (a hang is a failure too), and
 * there a failure keeps its message and ends the thread (cmocka's
 * longjmp must not cross threads).
 */
#define MSG_MAX 600
extern __thread char *worker_msg; /* non-NULL in a campaign thread */

void tfail (const char *fmt, ...)
    __attribute__ ((noreturn, format (printf, 1, 2)));

#define T_ASSERT(c)                                                            \
  do                                                                           \
    {                                                                          \
      if (!(c))                                                                \
        tfail ("%s:%d: %s", __FILE__, __LINE__, #c);                           \
    }                                                                          \
  while (0)

/* ---- power: one switch for every device and the backend ---- */

struct pdev;

struct power {
  pthread_rwlock_t rw; /* read: one device or backend call; write: cut */
  uint64_t ops;        /* atomic: counted calls since armed */
  uint64_t crash_at;   /* atomic: cut at this counted call (0: never) */
  bool sync_only;      /* atomic: count only syncs and backend flushes */
  bool crashed;        /* atomic */
  unsigned seed;       /* which unsynced writes survive */
  bool revert_backend; /* the backend loses its unflushed writes too */
  struct hhc_dev *cd[MAX_DEVS]; /* the crash devices (not wrappers) */
  unsigned ncd;
  unsigned char *img[MAX_DEVS]; /* what the cut left on each */
  struct membackend *mb;
  unsigned char *be_img;
  struct pdev *only; /* atomic: count only its calls after a fault */
  /* Torn tails: the log devices are HDDs (crashdev_set_tearing): a
   * cut tears one write each that it loses (the newest, sometimes an
   * older one, or the FUA write it fell on), whose bytes (all, or a
   * run of its 4 KiB pieces) are unreadable after the restore until a
   * durable write covers them; a superblock's or the void mark's too.
   * A FUA write the cut falls on was in flight: on any device it lands
   * in part, whole or not at all (it completes on the live device
   * after the cut, for the volume going on).  Not modelled: torn
   * pieces that are not one run, and torn bytes on the SSD (device 0).
   */
  bool torn_tails;
  struct crashdev_bad was[MAX_DEVS]; /* unreadable after the cut */
  const void *fua_buf;               /* the FUA write the cut fell on */
  struct hhc_dev *fua_dev;           /* its device (inner), or NULL */
  uint64_t fua_off;
  size_t fua_len;
  uint64_t torn;       /* torn writes, since power_init */
  uint64_t torn_sb;    /* of them, in the superblock area */
  uint64_t torn_older; /* of them, older than the newest lost */
  uint64_t torn_fua;   /* of them, the FUA write in flight */
  uint64_t fua_cuts;   /* cuts that fell on a FUA write */
  uint64_t partial;    /* lost writes that landed in part */
};

void power_init (struct power *pw, struct membackend *mb);
void power_destroy (struct power *pw);
/* The crash devices a cut applies to (SSD first, then the logs). */
void power_set_devs (struct power *pw, struct hhc_dev *const *cd, unsigned n);
bool power_crashed (struct power *pw);
/* Cut the power now: snapshot what survives, keep the devices live. */
void power_cut (struct power *pw);
/* Arm: cut at the at-th counted call from now (0: disarm). */
void power_arm (struct power *pw, uint64_t at, bool sync_only, unsigned seed,
                bool revert_backend);
/* Arm: cut at the at-th write or sync to pd (a pdev) made after a
 * write to it failed (pdev_fail_after, pdev_fail_once): a cut in what
 * the log does with a failed mirror, its void.
 */
void power_arm_after_fault (struct power *pw, uint64_t at, unsigned seed,
                            bool revert_backend, struct hhc_dev *pd);
/* Put the snapshot back (no volume open) and disarm. */
void power_restore (struct power *pw);

/* For the devices behind the switch (log-pdev.c). */
/* The call a cut may fall on: kind 0 read (not counted), 1 write, 2
 * sync or FUA write; p the device (NULL: the backend); fua_buf, off and
 * len a FUA write's (fua_buf NULL: none).
 */
struct pcall {
  int kind;
  struct pdev *p;
  const void *fua_buf;
  uint64_t off;
  size_t len;
};

void power_enter_call (struct power *pw, const struct pcall *c);
/* A call without a FUA write's bytes. */
void power_enter (struct power *pw, int kind, struct pdev *p);
void power_leave (struct power *pw);

/* ---- pdev: a device behind the switch, with faults and latency ---- */

/* A rendezvous of reads on n devices (pdev_set_meet). */
struct meet {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned n, arrived;
  bool timed_out; /* a read waited ms and gave up */
  unsigned ms;
};

void meet_init (struct meet *m, unsigned n, unsigned ms);
void meet_destroy (struct meet *m);

struct pdev {
  struct hhc_dev dev; /* first: the volume sees this */
  struct meet *meet;  /* atomic: the next log-region read waits there */
  struct hhc_dev *inner;
  struct power *pw;
  uint64_t writes;       /* atomic */
  uint64_t region_reads; /* atomic: reads past LOG_REGION_OFF */
  uint64_t fail_after;   /* atomic: writes that succeed before it fails */
  bool once;             /* atomic: that write fails alone */
  bool failing;          /* atomic: every call fails with EIO */
  bool failed_once;      /* atomic: a write has failed */
  /* The offsets of the first 8 writes below LOG_REGION_OFF
   * (a log's superblock area), in order: nsb counts them all (atomic).
   */
  uint64_t sb_writes[8];
  unsigned nsb;
  uint64_t bad_off, bad_len; /* reads that touch these bytes fail */
  unsigned sync_delay_us;    /* atomic: pdev_set_sync_delay */
};

struct pdev *to_pdev (struct hhc_dev *d);
struct hhc_dev *pdev_new (struct hhc_dev *inner, struct power *pw,
                          const char *name);
void pdev_free (struct hhc_dev *d);
/* The device fails (every call EIO) after n more successful writes. */
void pdev_fail_after (struct hhc_dev *d, uint64_t n);
/* The write after n more successful ones fails (EIO), alone. */
void pdev_fail_once (struct hhc_dev *d, uint64_t n);
void pdev_heal (struct hhc_dev *d);
/* Each sync (and FUA write) of d first sleeps us microseconds (the
 * volume's threads may be syncing it: atomic).
 */
void pdev_set_sync_delay (struct hhc_dev *d, unsigned us);
/* Offer FUA (as the inner device does: the default) or not. */
void pdev_set_fua (struct hhc_dev *d, bool on);
/* The next read of d in the log region (past LOG_REGION_OFF) waits at
 * m until reads of m->n devices have come there, or m->ms passed
 * (m->timed_out).  Once: later reads do not wait.
 */
void pdev_set_meet (struct hhc_dev *d, struct meet *m);

/* A crash device plus its wrapper. */
struct tdev {
  struct hhc_dev *cd, *pd;
};

void tdev_new (struct tdev *t, uint64_t size, struct power *pw,
               const char *name);
void tdev_free (struct tdev *t);

/* Whole-device images (for replaying one state several ways). */
/* Rewrite each valid log superblock copy of dev (checksum right) with
 * edit applied; the old bytes of both copies into saved.
 */
void edit_sbs (struct hhc_dev *dev, unsigned char saved[2 * LOG_SB_SIZE],
               void (*edit) (struct log_sb *));
unsigned char *dev_save (struct hhc_dev *cd);
void dev_load (struct hhc_dev *cd, const unsigned char *img);
void dev_blank (struct hhc_dev *cd);

/* ---- pbe: the memory backend behind the switch ---- */

struct pbe {
  struct membackend *mb;
  struct power *pw;
};

extern const struct hhc_backend_ops pbe_ops;

/* ---- env: a simple environment for the directed tests ---- */

struct env {
  struct membackend *mb;
  struct pbe be;
  struct tdev ssd;
  struct tdev logs[HHC_MAX_LOGS];
  unsigned nlogs;
  struct hhc_backend_info info;
  struct hhc_conf conf;
  struct hhc_preopened pre; /* devices given to hhc_open */
  struct hhc_volume *vol;
  uint64_t nblocks;
  uint32_t nslots;
};

/* Backend of nblocks blocks, block l holding pattern version 0. */
void env_init (struct env *e, uint64_t nblocks, uint32_t nslots, unsigned nlogs,
               uint64_t log_size);
int env_try_open (struct env *e);
void env_open (struct env *e);
void env_close (struct env *e);
/* A blank SSD (the old one is lost). */
void env_new_ssd (struct env *e);
void env_free (struct env *e);
/* Write version of block lba: 0 or errno (no cmocka assertion: for
 * the tests' own threads too).
 */
int env_try_write (struct env *e, uint64_t lba, uint64_t version);
void env_write (struct env *e, uint64_t lba, uint64_t version, bool fua);
void env_flush (struct env *e);
/* Does the backend (durable bytes) hold version v of block lba? */
bool backend_has (struct env *e, uint64_t lba, uint64_t v);
/* Does the volume read version v of block lba? */
bool reads_v (struct env *e, uint64_t lba, uint64_t v);
/* The version of block lba in the backend's durable bytes (-1: not a
 * whole block of one version of lba).
 */
int64_t backend_version (struct env *e, uint64_t lba);
/* The version of block lba that blk (BS bytes) holds (-1: not one). */
int64_t block_version (const unsigned char *blk, uint64_t lba);
/* Every block of the backend holds expect[lba]. */
void check_backend_state (struct env *e, const uint64_t *expect,
                          const char *what);
struct hhc_counts counts (struct env *e);
/* One mirror or more, write-back left to FLUSHes (high watermarks, no
 * idle write-back).
 */
void quiet_env_init (struct env *e, unsigned nlogs);
/* quiet_env_init with nlogs mirrors, the SSD, the mirrors and the
 * backend on the power switch pw; pw_env_free undoes both.
 */
void pw_env_init (struct env *e, struct power *pw, unsigned nlogs);
/* env_new_ssd, the new SSD on the power switch pw too (the old one is
 * freed: a cut must not reach it).
 */
void pw_env_new_ssd (struct env *e, struct power *pw);
void pw_env_free (struct env *e, struct power *pw);

#endif /* HHC_TEST_LOG_HELPERS_H */
