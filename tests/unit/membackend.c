/* Test support (membackend.h): the in-memory backend.  One mutex per
 * backend protects the bytes, the counters, the fault settings, the
 * hooks and the write log; the condition variable is broadcast
 * whenever a counter changes.  Hooks and the write delay run without
 * the mutex.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "membackend.h"

/* ------------------------------------------------------------------ */
/* membackend                                                          */
/* ------------------------------------------------------------------ */

struct fault {
  unsigned next; /* fail this many more calls */
  bool all;      /* fail every call */
};

struct hook {
  membackend_hook fn;
  void *opaque;
};

struct membackend {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t size;
  unsigned char *data;    /* what reads return */
  unsigned char *durable; /* as of the last flush */
  uint64_t *unflushed;    /* bitmap of 4 KiB units written since */
  uint64_t counts[MB_NCOUNTERS];
  struct fault faults[3]; /* indexed by enum mb_op */
  struct hook hooks[3];
  membackend_done_hook flush_done; /* see membackend_set_flush_done_hook */
  void *flush_done_opaque;
  unsigned write_delay_us;
  bool drop_on_flush_error; /* a failed flush forgets unflushed bytes */
  struct mb_extent *log;
  size_t nlog, caplog;
};

#define MB_UNIT 4096u

/* Mark [offset, offset+count) as written since the last flush. */
static void
mark_unflushed (struct membackend *mb, uint64_t offset, uint64_t count)
{
  for (uint64_t u = offset / MB_UNIT; count && u * MB_UNIT < offset + count;
       u++)
    mb->unflushed[u / 64] |= UINT64_C (1) << (u % 64);
}

struct membackend *
membackend_new (uint64_t size)
{
  struct membackend *mb = calloc (1, sizeof *mb);

  if (mb == NULL)
    return NULL;
  mb->size = size;
  mb->data = calloc (1, size ? size : 1);
  mb->durable = calloc (1, size ? size : 1);
  mb->unflushed = calloc ((size / MB_UNIT + 64) / 64, sizeof (uint64_t));
  if (!mb->data || !mb->durable || !mb->unflushed)
    {
      free (mb->data);
      free (mb->durable);
      free (mb->unflushed);
      free (mb);
      return NULL;
    }
  pthread_mutex_init (&mb->lock, NULL);
  pthread_cond_init (&mb->cond, NULL);
  return mb;
}

void
membackend_free (struct membackend *mb)
{
  if (mb == NULL)
    return;
  pthread_mutex_destroy (&mb->lock);
  pthread_cond_destroy (&mb->cond);
  free (mb->data);
  free (mb->durable);
  free (mb->unflushed);
  free (mb->log);
  free (mb);
}

struct hhc_backend_info
membackend_info (struct membackend *mb, uint32_t preferred_block,
                 const char *identity)
{
  struct hhc_backend_info info = {
    .size = mb->size,
    .preferred_block = preferred_block,
    .max_request = 0,
    .identity = identity,
    .can_trim = true,
    .can_zero = true,
    .can_fua = true,
    .multi_conn = true,
  };
  return info;
}

uint64_t
membackend_size (struct membackend *mb)
{
  return mb->size;
}

void
membackend_peek (struct membackend *mb, bool durable, void *buf, uint64_t count,
                 uint64_t offset)
{
  pthread_mutex_lock (&mb->lock);
  memcpy (buf, (durable ? mb->durable : mb->data) + offset, count);
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_poke (struct membackend *mb, const void *buf, uint64_t count,
                 uint64_t offset)
{
  pthread_mutex_lock (&mb->lock);
  memcpy (mb->data + offset, buf, count);
  memcpy (mb->durable + offset, buf, count);
  pthread_mutex_unlock (&mb->lock);
}

int
membackend_cmp (struct membackend *mb, bool durable, const void *buf,
                uint64_t count, uint64_t offset)
{
  int r;

  pthread_mutex_lock (&mb->lock);
  r = memcmp ((durable ? mb->durable : mb->data) + offset, buf, count);
  pthread_mutex_unlock (&mb->lock);
  return r;
}

uint64_t
membackend_count (struct membackend *mb, enum mb_counter c)
{
  uint64_t v;

  pthread_mutex_lock (&mb->lock);
  v = mb->counts[c];
  pthread_mutex_unlock (&mb->lock);
  return v;
}

void
membackend_reset_counts (struct membackend *mb)
{
  pthread_mutex_lock (&mb->lock);
  memset (mb->counts, 0, sizeof mb->counts);
  pthread_mutex_unlock (&mb->lock);
}

void
test_deadline (struct timespec *ts, unsigned ms)
{
  hhc_deadline (ts, ms); /* the core's helper (common.h) */
}

bool
membackend_wait_count (struct membackend *mb, enum mb_counter c,
                       uint64_t target, unsigned timeout_ms)
{
  struct timespec ts;
  bool ok = true;

  test_deadline (&ts, timeout_ms);
  pthread_mutex_lock (&mb->lock);
  while (mb->counts[c] < target)
    if (pthread_cond_timedwait (&mb->cond, &mb->lock, &ts) == ETIMEDOUT)
      {
        ok = mb->counts[c] >= target;
        break;
      }
  pthread_mutex_unlock (&mb->lock);
  return ok;
}

void
membackend_fail_next (struct membackend *mb, enum mb_op op, unsigned n)
{
  pthread_mutex_lock (&mb->lock);
  mb->faults[op].next = n;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_fail_all (struct membackend *mb, enum mb_op op, bool on)
{
  pthread_mutex_lock (&mb->lock);
  mb->faults[op].all = on;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_write_delay (struct membackend *mb, unsigned us)
{
  pthread_mutex_lock (&mb->lock);
  mb->write_delay_us = us;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_drop_on_flush_error (struct membackend *mb, bool on)
{
  pthread_mutex_lock (&mb->lock);
  mb->drop_on_flush_error = on;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_flush_done_hook (struct membackend *mb, membackend_done_hook fn,
                                void *opaque)
{
  pthread_mutex_lock (&mb->lock);
  mb->flush_done = fn;
  mb->flush_done_opaque = opaque;
  pthread_mutex_unlock (&mb->lock);
}

void
membackend_set_hook (struct membackend *mb, enum mb_op op, membackend_hook fn,
                     void *opaque)
{
  pthread_mutex_lock (&mb->lock);
  mb->hooks[op] = (struct hook){ fn, opaque };
  pthread_mutex_unlock (&mb->lock);
}

size_t
membackend_write_log (struct membackend *mb, struct mb_extent *out, size_t max)
{
  size_t n;

  pthread_mutex_lock (&mb->lock);
  n = mb->nlog;
  if (out)
    memcpy (out, mb->log, (n < max ? n : max) * sizeof *out);
  pthread_mutex_unlock (&mb->lock);
  return n;
}

void
membackend_clear_write_log (struct membackend *mb)
{
  pthread_mutex_lock (&mb->lock);
  mb->nlog = 0;
  pthread_mutex_unlock (&mb->lock);
}

/* Run the hook of op (no lock held). */
static void
run_hook (struct membackend *mb, enum mb_op op, uint64_t offset, uint32_t count)
{
  struct hook h;

  pthread_mutex_lock (&mb->lock);
  h = mb->hooks[op];
  pthread_mutex_unlock (&mb->lock);
  if (h.fn)
    h.fn (h.opaque, offset, count);
}

/* Should this call of op fail?  (lock held) */
static bool
inject (struct membackend *mb, enum mb_op op)
{
  static const enum mb_counter errs[]
      = { MB_READ_ERRORS, MB_WRITE_ERRORS, MB_FLUSH_ERRORS };
  struct fault *f = &mb->faults[op];

  if (!f->all && f->next == 0)
    return false;
  if (!f->all)
    f->next--;
  mb->counts[errs[op]]++;
  pthread_cond_broadcast (&mb->cond);
  return true;
}

static void
bump (struct membackend *mb, enum mb_counter c)
{
  mb->counts[c]++;
  pthread_cond_broadcast (&mb->cond);
}

static bool
in_range (struct membackend *mb, uint64_t count, uint64_t offset)
{
  return offset <= mb->size && count <= mb->size - offset;
}

static int
mb_pread (void *ctx, void *buf, uint32_t count, uint64_t offset)
{
  struct membackend *mb = ctx;
  int r = 0;

  run_hook (mb, MB_OP_READ, offset, count);
  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_READ))
    r = EIO;
  else
    {
      memcpy (buf, mb->data + offset, count);
      bump (mb, MB_READS);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

static void
append_log (struct membackend *mb, uint64_t offset, uint32_t count)
{
  if (mb->nlog == mb->caplog)
    {
      size_t ncap = mb->caplog ? mb->caplog * 2 : 256;
      struct mb_extent *n = realloc (mb->log, ncap * sizeof *n);
      if (n == NULL)
        return; /* the log is best effort */
      mb->log = n;
      mb->caplog = ncap;
    }
  mb->log[mb->nlog++] = (struct mb_extent){ offset, count };
}

static int
mb_pwrite (void *ctx, const void *buf, uint32_t count, uint64_t offset,
           bool fua)
{
  struct membackend *mb = ctx;
  unsigned delay;
  int r = 0;

  run_hook (mb, MB_OP_WRITE, offset, count);
  pthread_mutex_lock (&mb->lock);
  delay = mb->write_delay_us;
  pthread_mutex_unlock (&mb->lock);
  if (delay)
    {
      struct timespec ts = { delay / 1000000, (long)(delay % 1000000) * 1000 };
      nanosleep (&ts, NULL);
    }
  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_WRITE))
    r = EIO;
  else
    {
      memcpy (mb->data + offset, buf, count);
      if (fua)
        memcpy (mb->durable + offset, buf, count);
      mark_unflushed (mb, offset, count);
      append_log (mb, offset, count);
      bump (mb, MB_WRITES);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

/* Settle the units written since the last flush: make them durable
 * (keep), or drop them, back to their durable bytes (lock held).
 */
static void
settle_unflushed (struct membackend *mb, bool keep)
{
  for (uint64_t w = 0; w < (mb->size / MB_UNIT + 64) / 64; w++)
    while (mb->unflushed[w])
      {
        uint64_t u = w * 64 + __builtin_ctzll (mb->unflushed[w]);
        uint64_t o = u * MB_UNIT;
        uint64_t n = mb->size - o < MB_UNIT ? mb->size - o : MB_UNIT;
        if (keep)
          memcpy (mb->durable + o, mb->data + o, n);
        else
          memcpy (mb->data + o, mb->durable + o, n);
        mb->unflushed[w] &= mb->unflushed[w] - 1;
      }
}

static int
mb_flush (void *ctx)
{
  struct membackend *mb = ctx;
  membackend_done_hook done;
  void *done_opaque;
  int r = 0;

  run_hook (mb, MB_OP_FLUSH, 0, 0);
  pthread_mutex_lock (&mb->lock);
  if (inject (mb, MB_OP_FLUSH))
    {
      r = EIO;
      if (mb->drop_on_flush_error)
        settle_unflushed (mb, false);
    }
  else
    {
      settle_unflushed (mb, true);
      bump (mb, MB_FLUSHES);
    }
  done = mb->flush_done;
  done_opaque = mb->flush_done_opaque;
  pthread_mutex_unlock (&mb->lock);
  if (done)
    done (done_opaque, r);
  return r;
}

/* Trim reads back as zeros, like the memory plugin. */
static int
mb_zero_range (void *ctx, uint32_t count, uint64_t offset, enum mb_counter c)
{
  struct membackend *mb = ctx;
  int r = 0;

  pthread_mutex_lock (&mb->lock);
  if (!in_range (mb, count, offset))
    r = EINVAL;
  else if (inject (mb, MB_OP_WRITE))
    r = EIO;
  else
    {
      memset (mb->data + offset, 0, count);
      mark_unflushed (mb, offset, count);
      bump (mb, c);
    }
  pthread_mutex_unlock (&mb->lock);
  return r;
}

static int
mb_trim (void *ctx, uint32_t count, uint64_t offset)
{
  return mb_zero_range (ctx, count, offset, MB_TRIMS);
}

static int
mb_zero (void *ctx, uint32_t count, uint64_t offset)
{
  return mb_zero_range (ctx, count, offset, MB_ZEROS);
}

const struct hhc_backend_ops membackend_ops = {
  .pread = mb_pread,
  .pwrite = mb_pwrite,
  .flush = mb_flush,
  .trim = mb_trim,
  .zero = mb_zero,
};
