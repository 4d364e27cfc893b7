/* The fixture of the pipeline tests (logpipe.h). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "logpipe.h"
#include "membackend.h"

/* The sequence number of the segment (or wrap marker) buf starts. */
static uint64_t
seg_seq (const void *buf, size_t len)
{
  if (len < 16 || memcmp (buf, LOG_SEG_MAGIC, 8) != 0)
    return 0;
  return get64 ((const char *)buf + 8);
}

static int
gd_write (struct hhc_dev *d, const void *buf, size_t len, uint64_t off,
          bool fua)
{
  struct gdev *g = (struct gdev *)d;
  uint64_t seq = seg_seq (buf, len);
  int r = 0;

  pthread_mutex_lock (&g->mu);
  g->active++;
  if (g->active > g->max_active)
    g->max_active = g->active;
  if (seq && seq == g->hold_seq)
    {
      g->held = true;
      pthread_cond_broadcast (&g->cv);
      while (g->hold_seq == seq)
        pthread_cond_wait (&g->cv, &g->mu);
      r = g->release_err;
    }
  pthread_mutex_unlock (&g->mu);
  if (r == 0)
    r = fua ? dev_pwrite_fua (g->inner, buf, len, off)
            : dev_pwrite (g->inner, buf, len, off);
  pthread_mutex_lock (&g->mu);
  g->active--;
  g->fua_writes += fua;
  if (r == 0 && seq && g->ndone < 256)
    {
      g->done_seq[g->ndone] = seq;
      g->done_off[g->ndone++] = off;
    }
  pthread_cond_broadcast (&g->cv);
  pthread_mutex_unlock (&g->mu);
  return r;
}

static int
gd_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return gd_write (d, buf, len, off, false);
}

static int
gd_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return gd_write (d, buf, len, off, true);
}

static int
gd_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  return dev_pread (((struct gdev *)d)->inner, buf, len, off);
}

static int
gd_sync (struct hhc_dev *d)
{
  struct gdev *g = (struct gdev *)d;

  int r;

  pthread_mutex_lock (&g->mu);
  g->syncs++;
  r = g->sync_fail_once;
  g->sync_fail_once = 0;
  pthread_mutex_unlock (&g->mu);
  return r ? r : dev_sync (g->inner);
}

static void
gd_close (struct hhc_dev *d)
{
}

static const struct hhc_dev_ops gd_ops = {
  .pread = gd_pread,
  .pwrite = gd_pwrite,
  .sync = gd_sync,
  .close = gd_close,
};

static const struct hhc_dev_ops gd_fua_ops = {
  .pread = gd_pread,
  .pwrite = gd_pwrite,
  .sync = gd_sync,
  .close = gd_close,
  .pwrite_fua = gd_pwrite_fua,
};

static const uint8_t cache_uuid[16] = { 0x70, 0x69 };
static const char *const paths[MAXM] = { "pipe-a", "pipe-b" };

static int
plog_relog (void *opaque, uint32_t key, uint64_t lba)
{
  struct plog *t = opaque;

  log_append (t->log, key, lba, t->blocks[key]);
  return 0;
}

struct hhc_log *
plog_open_log (struct plog *t, bool online, enum log_found *found)
{
  struct log_conf lc = {
    .paths = paths,
    .npaths = t->nm,
    .block_size = online ? BS : 512,
    .volume_size = online ? (uint64_t)NKEYS * BS : 0,
    .identity = online ? "pipe" : NULL,
    .segment_size = SEG,
    .inflight = t->inflight,
    .msgfn = test_msg,
    .devs = t->devs,
  };
  struct hhc_log *log = NULL;

  assert_int_equal (log_open (&lc, cache_uuid, &log, found), 0);
  return log;
}

struct plog *
plog_new (unsigned nm, unsigned inflight, bool fua)
{
  struct plog *t = calloc (1, sizeof *t);
  struct log_callbacks cb = { t, plog_relog, NULL, NULL };
  enum log_found found;

  assert_non_null (t);
  t->nm = nm;
  t->inflight = inflight;
  for (unsigned i = 0; i < nm; i++)
    {
      struct gdev *g = &t->gd[i];
      assert_int_equal (crashdev_create (LOG_DEV, &t->cd[i]), 0);
      pthread_mutex_init (&g->mu, NULL);
      pthread_cond_init (&g->cv, NULL);
      g->inner = t->cd[i];
      g->dev.ops = fua ? &gd_fua_ops : &gd_ops;
      g->dev.size = LOG_DEV;
      g->dev.name = (char *)paths[i];
      t->devs[i] = &g->dev;
    }
  t->log = plog_open_log (t, true, &found);
  assert_int_equal (found, LOG_FOUND_BLANK);
  assert_int_equal (log_start (t->log, cache_uuid, NKEYS, &cb), 0);
  assert_int_equal (log_rebase (t->log, NULL, NULL, 0), 0);
  return t;
}

void
plog_free (struct plog *t)
{
  log_close (t->log);
  for (unsigned i = 0; i < t->nm; i++)
    {
      crashdev_destroy (t->cd[i]);
      pthread_cond_destroy (&t->gd[i].cv);
      pthread_mutex_destroy (&t->gd[i].mu);
    }
  free (t);
}

void
put_block (struct plog *t, uint32_t key, unsigned char v)
{
  memset (t->blocks[key], v, BS);
  log_append (t->log, key, key, t->blocks[key]);
}

/* What a replay writes: per LBA the first byte of the last block. */
int first[NKEYS];

int
replayed_write (void *opaque, const void *buf, uint64_t lba)
{
  if (lba >= NKEYS)
    return EINVAL;
  first[lba] = *(const unsigned char *)buf;
  return 0;
}

bool
keep_none (size_t i, void *opaque)
{
  return false;
}
