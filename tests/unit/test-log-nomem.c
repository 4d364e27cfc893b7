/* The log without memory (issue 28 item 7): it never aborts.  What is
 * bounded is allocated at log_start, so filling a buffer allocates
 * nothing; what is not (a revoke while no buffer is current, room for
 * a segment's deaths) stops the log when it cannot be had: every
 * mirror is failed, barriers fail (FLUSHes fall back to writing every
 * dirty block back), and the last mirror keeps its log until the
 * fallback has voided it.
 *
 * The failures come from a realloc wrapper linked in front of the
 * core's (-Wl,--wrap=realloc for this program only, Makefile.am): the
 * core is the same code as in production.  These tests drive the log
 * directly (log.h), on a crash device behind a hookdev whose writes a
 * gate can hold.
 *
 * Tests:
 *   nomem_fill            appends (superseding older entries), an
 *                         in-place update and revokes into the current
 *                         buffer ask for no memory; the replay is right.
 *   nomem_pending_revoke  a revoke while no buffer is current, refused
 *                         memory: the log stops; the barrier fails; the
 *                         last mirror is voided only by log_void_stale.
 *   nomem_deaths          no memory for a segment's deaths: the segment
 *                         is not written, the log stops, and a replay
 *                         holds the barrier before it.
 *   nomem_rev_cap         rev_cap revokes pending while no buffer is
 *                         current: the buffer that takes them all is
 *                         sealed at once, so the next revoke asks for
 *                         no memory (once that buffer stayed current,
 *                         the next revoke grew its full list, and
 *                         without memory stopped the log).
 *
 * nomem_rev_cap waits for the log's state (log_int.h, under its lock)
 * and needs more keys than rev_cap (at least 256), and a log device
 * to hold them: its own sizes (nlog_new_sized).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common.h"
#include "devcrash.h"
#include "log.h"
#include "log_int.h"
#include "membackend.h"

#define BS 4096u
#define NKEYS 64   /* keys (cache slots) of the volume */
#define SEG 65536u /* 16 blocks a segment */
#define LOG_DEV (LOG_REGION_OFF + 1024 * 1024)
/* nomem_rev_cap: more keys than rev_cap, and a region where those
 * keep less than half of it in use (more makes the writer relog the
 * head: active_reclaim).
 */
#define RC_NKEYS 320
#define RC_LOG_DEV (LOG_REGION_OFF + 8 * 1024 * 1024)

/* ---- the realloc wrapper ---- */

void *__real_realloc (void *p, size_t n);
void *__wrap_realloc (void *p, size_t n);

enum nomem_mode { NOMEM_OFF, NOMEM_NEXT, NOMEM_ALL };
static int nomem_mode;      /* atomic: enum nomem_mode */
static unsigned nomem_seen; /* atomic: calls refused */

void *
__wrap_realloc (void *p, size_t n)
{
  int mode = __atomic_load_n (&nomem_mode, __ATOMIC_ACQUIRE);

  if (mode == NOMEM_OFF)
    return __real_realloc (p, n);
  if (mode == NOMEM_NEXT)
    __atomic_store_n (&nomem_mode, NOMEM_OFF, __ATOMIC_RELEASE);
  __atomic_add_fetch (&nomem_seen, 1, __ATOMIC_ACQ_REL);
  return NULL;
}

static void
nomem_arm (enum nomem_mode mode)
{
  __atomic_store_n (&nomem_seen, 0, __ATOMIC_RELEASE);
  __atomic_store_n (&nomem_mode, mode, __ATOMIC_RELEASE);
}

/* Disarm; how many calls were refused since nomem_arm. */
static unsigned
nomem_disarm (void)
{
  __atomic_store_n (&nomem_mode, NOMEM_OFF, __ATOMIC_RELEASE);
  return __atomic_load_n (&nomem_seen, __ATOMIC_ACQUIRE);
}

/* ---- a gate on the log device's writes ---- */

struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool closed;  /* writes wait */
  bool waiting; /* a write waits */
};

static int
gate_before (void *opaque, const void *buf, size_t len, uint64_t off)
{
  struct gate *g = opaque;

  pthread_mutex_lock (&g->mu);
  while (g->closed)
    {
      g->waiting = true;
      pthread_cond_broadcast (&g->cv);
      pthread_cond_wait (&g->cv, &g->mu);
    }
  g->waiting = false;
  pthread_mutex_unlock (&g->mu);
  return 0;
}

static void
gate_set (struct gate *g, bool closed)
{
  pthread_mutex_lock (&g->mu);
  g->closed = closed;
  pthread_cond_broadcast (&g->cv);
  pthread_mutex_unlock (&g->mu);
}

/* Wait until a write waits at the closed gate. */
static void
gate_wait_writer (struct gate *g)
{
  pthread_mutex_lock (&g->mu);
  while (!g->waiting)
    pthread_cond_wait (&g->cv, &g->mu);
  pthread_mutex_unlock (&g->mu);
}

/* ---- a log on it ---- */

struct nlog {
  struct hhc_dev *cd, *hd; /* the crash device, the hookdev over it */
  struct gate gate;
  struct hhc_log *log;
  uint32_t nkeys;
  unsigned char (*blocks)[BS]; /* nkeys: key k's block */
};

static const uint8_t cache_uuid[16] = { 0x70, 0x6e };

/* Relog: key's block as it was last put. */
static int
nlog_relog (void *opaque, uint32_t key, uint64_t lba)
{
  struct nlog *t = opaque;

  log_append (t->log, key, lba, t->blocks[key]);
  return 0;
}

static void
nlog_pressure (void *opaque)
{
}

/* Open the log on t's device: as the gateway does (identity given), or
 * offline (NULL: the volume it records).
 */
static struct hhc_log *
nlog_open_log (struct nlog *t, const char *identity, enum log_found *found)
{
  static const char *const paths[] = { "nomem-log" };
  struct log_conf lc = {
    .paths = paths,
    .npaths = 1,
    .block_size = identity ? BS : 512,
    .volume_size = identity ? (uint64_t)t->nkeys * BS : 0,
    .identity = identity,
    .segment_size = SEG,
    .nbuffers = 2,
    .msgfn = test_msg,
    .devs = &t->hd,
  };
  struct hhc_log *log = NULL;

  assert_int_equal (log_open (&lc, cache_uuid, &log, found), 0);
  return log;
}

/* A new log of nkeys keys on a log device of log_dev bytes, started
 * and rebased (nothing dirty).
 */
static struct nlog *
nlog_new_sized (uint32_t nkeys, uint64_t log_dev)
{
  struct nlog *t = calloc (1, sizeof *t);
  struct log_callbacks cb = { t, nlog_relog, nlog_pressure, NULL };
  enum log_found found;

  assert_non_null (t);
  t->nkeys = nkeys;
  t->blocks = calloc (nkeys, BS);
  assert_non_null (t->blocks);
  pthread_mutex_init (&t->gate.mu, NULL);
  pthread_cond_init (&t->gate.cv, NULL);
  assert_int_equal (crashdev_create (log_dev, &t->cd), 0);
  t->hd = hookdev_new (t->cd);
  assert_non_null (t->hd);
  hookdev_set_hooks (t->hd, gate_before, NULL, NULL, &t->gate);
  t->log = nlog_open_log (t, "nomem", &found);
  assert_int_equal (found, LOG_FOUND_BLANK);
  assert_int_equal (log_start (t->log, cache_uuid, nkeys, &cb), 0);
  assert_int_equal (log_rebase (t->log, NULL, NULL, 0), 0);
  return t;
}

static struct nlog *
nlog_new (void)
{
  return nlog_new_sized (NKEYS, LOG_DEV);
}

static void
nlog_free (struct nlog *t)
{
  log_close (t->log);
  hookdev_destroy (t->hd);
  crashdev_destroy (t->cd);
  pthread_cond_destroy (&t->gate.cv);
  pthread_mutex_destroy (&t->gate.mu);
  free (t->blocks);
  free (t);
}

/* Key key's block (LBA lba) is now all version v. */
static void
put_block (struct nlog *t, uint32_t key, uint64_t lba, unsigned char v)
{
  memset (t->blocks[key], v, BS);
  log_append (t->log, key, lba, t->blocks[key]);
}

/* What a replay writes: per LBA the first byte of the last block. */
struct replayed {
  unsigned n;
  int first[NKEYS]; /* -1: not written */
};

static int
replayed_write (void *opaque, const void *buf, uint64_t lba)
{
  struct replayed *r = opaque;

  if (lba >= NKEYS)
    return EINVAL;
  r->first[lba] = *(const unsigned char *)buf;
  r->n++;
  return 0;
}

/* Close t's log and replay it offline (as hhcctl recover). */
static void
nlog_replay (struct nlog *t, struct replayed *r)
{
  enum log_found found;

  log_close (t->log);
  memset (r, 0, sizeof *r);
  for (unsigned i = 0; i < NKEYS; i++)
    r->first[i] = -1;
  t->log = nlog_open_log (t, NULL, &found);
  assert_int_equal (found, LOG_FOUND_VALID);
  assert_int_equal (log_replay (t->log, replayed_write, NULL, r), 0);
}

static struct log_stats
stats (struct nlog *t)
{
  struct log_stats s;

  log_get_stats (t->log, &s);
  return s;
}

/* ---- the log's state (log_int.h) ---- */

/* Wait until a buffer is current and has taken every pending revoke
 * (buf_cv: a buffer became current), for at most 10 s.  Returns
 * whether it happened.
 */
static bool
wait_all_placed (struct hhc_log *log)
{
  struct timespec deadline;
  bool placed;
  int r = 0;

  hhc_deadline (&deadline, 10000);
  pthread_mutex_lock (&log->lock);
  while (!(placed = log->cur != NULL && log->pending_rev.len == 0)
         && log->healthy > 0 && r != ETIMEDOUT)
    r = pthread_cond_timedwait (&log->buf_cv, &log->lock, &deadline);
  pthread_mutex_unlock (&log->lock);
  return placed;
}

/* ---- tests ---- */

static void
test_nomem_fill (void **state)
{
  struct nlog *t = nlog_new ();
  struct replayed r;
  unsigned char part[512];

  for (uint32_t k = 0; k < 5; k++)
    put_block (t, k, k, 1);
  assert_int_equal (log_barrier (t->log), 0);
  /* Fewer than a segment's blocks: nothing is sealed or written. */
  nomem_arm (NOMEM_ALL);
  for (uint32_t k = 0; k < 4; k++)
    put_block (t, k, k, 2); /* each supersedes an entry on disk */
  memset (part, 3, sizeof part);
  log_update (t->log, 0, 0, part, 0, sizeof part); /* in place */
  log_revoke (t->log, 1, 1); /* in the buffer, and older on disk */
  log_revoke (t->log, 4, 4); /* on disk only */
  put_block (t, 5, 5, 2);
  assert_int_equal (nomem_disarm (), 0);
  assert_true (log_healthy (t->log));
  assert_int_equal (log_barrier (t->log), 0);
  nlog_replay (t, &r);
  assert_int_equal (r.n, 4);
  assert_int_equal (r.first[0], 3);
  assert_int_equal (r.first[1], -1);
  assert_int_equal (r.first[2], 2);
  assert_int_equal (r.first[3], 2);
  assert_int_equal (r.first[4], -1);
  assert_int_equal (r.first[5], 2);
  nlog_free (t);
}

static void
test_nomem_pending_revoke (void **state)
{
  struct nlog *t = nlog_new ();
  unsigned char sb[LOG_SB_SIZE];
  struct log_sb d;

  /* Two buffers: the first held at the gate by the writer, the second
   * sealed behind it; none is current.
   */
  gate_set (&t->gate, true);
  for (uint32_t k = 0; k < 16; k++)
    put_block (t, k, k, 1);
  gate_wait_writer (&t->gate);
  for (uint32_t k = 16; k < 32; k++)
    put_block (t, k, k, 1);
  nomem_arm (NOMEM_NEXT);
  log_revoke (t->log, 20, 20); /* waits in pending_rev: no memory */
  assert_int_equal (nomem_disarm (), 1);
  assert_false (log_healthy (t->log));
  assert_int_equal (stats (t).mirrors_failed, 1);
  /* The last mirror's log is what survives the loss of the SSD until
   * a FLUSH has fallen back: not voided yet.
   */
  assert_int_equal (stats (t).mirrors_unvoided, 0);
  gate_set (&t->gate, false);
  assert_int_equal (log_barrier (t->log), EIO);
  /* The FLUSH fell back: every dirty block is on the backend. */
  assert_int_equal (log_void_stale (t->log), 0);
  for (unsigned c = 0; c < 2; c++)
    {
      assert_int_equal (dev_pread (t->cd, sb, sizeof sb, c * LOG_SB_SIZE), 0);
      assert_int_equal (log_sb_decode (sb, &d), ESTALE);
    }
  nlog_free (t);
}

static void
test_nomem_deaths (void **state)
{
  struct nlog *t = nlog_new ();
  struct replayed r;

  put_block (t, 0, 0, 1);
  put_block (t, 1, 1, 1);
  assert_int_equal (log_barrier (t->log), 0);
  put_block (t, 0, 0, 2); /* supersedes version 1: a death */
  nomem_arm (NOMEM_NEXT);
  assert_int_equal (log_barrier (t->log), EIO);
  assert_int_equal (nomem_disarm (), 1);
  assert_false (log_healthy (t->log));
  assert_int_equal (stats (t).mirrors_unvoided, 0);
  /* Later barriers did not count the segment not written. */
  nlog_replay (t, &r);
  assert_int_equal (r.n, 2);
  assert_int_equal (r.first[0], 1);
  assert_int_equal (r.first[1], 1);
  nlog_free (t);
}

static void
test_nomem_rev_cap (void **state)
{
  struct nlog *t = nlog_new_sized (RC_NKEYS, RC_LOG_DEV);
  uint32_t cap = t->log->rev_cap, k;
  bool none_current;
  size_t pending;

  /* Keys 0..cap on disk: a revoke of each needs a record. */
  assert_true (cap + 1 + 2 * 16 <= RC_NKEYS);
  for (k = 0; k <= cap; k++)
    {
      put_block (t, k, k, 1);
      if (k % 16 == 15)
        assert_int_equal (log_barrier (t->log), 0);
    }
  assert_int_equal (log_barrier (t->log), 0);
  /* Both buffers sealed, the writer held at the gate: none is
   * current, and cap revokes wait in pending_rev.
   */
  gate_set (&t->gate, true);
  for (k = cap + 1; k < cap + 1 + 2 * 16; k++)
    put_block (t, k, k, 1);
  gate_wait_writer (&t->gate);
  for (k = 0; k < cap; k++)
    log_revoke (t->log, k, k);
  pthread_mutex_lock (&t->log->lock);
  none_current = t->log->cur == NULL;
  pending = t->log->pending_rev.len;
  pthread_mutex_unlock (&t->log->lock);
  assert_true (none_current);
  assert_int_equal (pending, cap);
  /* The first buffer written and free again, it takes all cap (sealed
   * at once); the second, written, becomes current with none.
   */
  gate_set (&t->gate, false);
  assert_true (wait_all_placed (t->log));
  assert_true (log_healthy (t->log));
  nomem_arm (NOMEM_ALL);
  log_revoke (t->log, cap, cap); /* into the current buffer */
  assert_int_equal (nomem_disarm (), 0);
  assert_true (log_healthy (t->log));
  assert_int_equal (log_barrier (t->log), 0);
  nlog_free (t);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_nomem_fill),
    cmocka_unit_test (test_nomem_pending_revoke),
    cmocka_unit_test (test_nomem_deaths),
    cmocka_unit_test (test_nomem_rev_cap),
  };
  test_filter_from_env ();
  return cmocka_run_group_tests (tests, NULL, NULL);
}
