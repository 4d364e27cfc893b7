/* Background write-back: the flusher thread (see flusher.h), which
 * decides when and how fast to write back and runs the batches of
 * writeback.c.
 */
#include <config.h>

#include <stdio.h>

#include "common.h"
#include "reclaim.h"
#include "flusher.h"
#include "pace.h"
#include "vol.h"

/* ---- the thread ---- */

/* Wait until kicked or ms pass (flusher lock held). */
static void
nap (struct hhc_flusher *f, unsigned ms)
{
  struct timespec ts;

  if (f->kicked || f->stop)
    return;
  hhc_deadline (&ts, ms);
  pthread_cond_timedwait (&f->cond, &f->lock, &ts);
}

static void write_stats (struct hhc_volume *vol, uint64_t *last);

/* The flusher lock is held: pace_of takes the log's lock (flusher lock
 * -> log lock, vol.h).
 */
static struct pace
decide (struct hhc_flusher *f)
{
  return pace_of (f->vol, f->draining > 0);
}

/* Back-off after failed batches. */
struct backoff {
  unsigned ms;       /* doubles after each failed batch */
  uint64_t retry_at; /* no batch before this time (ns) */
};

/* How long to nap after a round whose batch returned n (0: none ran);
 * 0: go on at full speed.
 */
static unsigned
pause_ms (struct hhc_volume *vol, struct pace p, long n, uint64_t now,
          struct backoff *bo)
{
  if (n < 0)
    {
      /* Backend trouble: retry with capped exponential back-off;
       * kicks from stalled writers do not shorten it.
       */
      bo->ms = bo->ms ? HHC_MIN (bo->ms * 2, 5000u) : 100;
      bo->retry_at = hhc_now_ns () + (uint64_t)bo->ms * 1000000;
      stat_add (&vol->stats.writeback_retries, 1);
      return bo->ms;
    }
  if (n > 0)
    bo->ms = 0;
  if (p.go && now < bo->retry_at)
    return (bo->retry_at - now) / 1000000 + 1;
  if (p.go && n > 0 && p.full)
    return 0; /* full speed */
  return p.go && n > 0 ? 20 : 100;
}

static void *
flusher_thread (void *arg)
{
  struct hhc_flusher *f = arg;
  struct hhc_volume *vol = f->vol;
  struct backoff bo = { 0, 0 };
  uint64_t last_stats = 0;

  hhc_lock (&f->lock);
  while (!f->stop)
    {
      struct pace p = decide (f);
      uint64_t now = hhc_now_ns ();
      long n = 0;
      unsigned ms;

      f->kicked = false;
      hhc_unlock (&f->lock);
      write_stats (vol, &last_stats);
      if (vol_needs_reclaim (vol))
        vol_reclaim (vol);
      /* A failed cache device may return stale data: never write it
       * back (see cache_is_failed).
       */
      if (cache_is_failed (&vol->cache))
        p.go = false;
      if (p.go && now >= bo.retry_at)
        n = flusher_batch (vol, f->bctx, vol->conf.writeback_threads);
      /* What the batch cleaned can be evicted now, not a round later. */
      if (n > 0 && vol_needs_reclaim (vol))
        vol_reclaim (vol);
      hhc_lock (&f->lock);
      f->batches++;
      f->last_err = n < 0 ? (int)-n : 0;
      pthread_cond_broadcast (&f->done);
      if ((ms = pause_ms (vol, p, n, now, &bo)) > 0)
        nap (f, ms);
    }
  hhc_unlock (&f->lock);
  write_stats (vol, &last_stats);
  return NULL;
}

/* Rewrite the stats file once a second. */
static void
write_stats (struct hhc_volume *vol, uint64_t *last)
{
  uint64_t now = hhc_now_ns ();
  char *json;

  if (vol->conf.stats_path == NULL || now - *last < UINT64_C (1000000000))
    return;
  *last = now;
  json = hhc_stats_json (vol);
  if (json)
    {
      int r = stats_write_file (vol->conf.stats_path, json);
      if (r)
        hhc_msg (vol->conf.msgfn, HHC_MSG_ERROR, "stats: %s: %s",
                 vol->conf.stats_path, strerror (r));
      free (json);
    }
}

int
flusher_start (struct hhc_flusher *f, struct hhc_volume *vol, void *bctx)
{
  int r;

  f->vol = vol;
  f->bctx = bctx;
  pthread_mutex_init (&f->lock, NULL);
  pthread_cond_init (&f->cond, NULL);
  pthread_cond_init (&f->done, NULL);
  r = pthread_create (&f->thread, NULL, flusher_thread, f);
  if (r)
    return r;
  f->running = true;
  return 0;
}

void
flusher_stop (struct hhc_flusher *f)
{
  if (!f->running)
    return;
  hhc_lock (&f->lock);
  f->stop = true;
  pthread_cond_broadcast (&f->cond);
  hhc_unlock (&f->lock);
  pthread_join (f->thread, NULL);
  f->running = false;
  pthread_mutex_destroy (&f->lock);
  pthread_cond_destroy (&f->cond);
  pthread_cond_destroy (&f->done);
}

void
flusher_kick (struct hhc_flusher *f)
{
  if (!f->running)
    return;
  hhc_lock (&f->lock);
  f->kicked = true;
  pthread_cond_signal (&f->cond);
  hhc_unlock (&f->lock);
}
