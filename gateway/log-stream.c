/* The replay's I/O: the surviving blocks (sorted by device offset)
 * read from the log in runs and handed to the sink's writers.
 *
 * Runs: one read request covers consecutive surviving blocks while the
 * request stays within RUN_MAX bytes and the dead bytes between two of
 * them (segment headers, blocks a later segment superseded or revoked)
 * are at most GAP_MAX.  On an HDD a new request costs a seek and a
 * rotation (4-10 ms), the time to read 0.5-1.5 MiB; reading through
 * 64 KiB costs under 0.5 ms there, and at most doubles the bytes read
 * on a device where requests are cheap (a gap longer than a block
 * opens one).
 *
 * Buffers (struct rbuf), each holding one run:
 *
 *   free --reader: pread--> full --writer: write--> free
 *
 * The caller's thread is the reader: it takes a free buffer, reads a
 * run into it and queues it; writers threads take full buffers, sort
 * the run's blocks by LBA into their own gather buffer and call the
 * sink once per range of consecutive LBAs.  With writers + 2 buffers
 * the reader stays a run ahead of every writer.  Each LBA is in one
 * run only (the map kept its newest version), so the writes may run in
 * any order.  A run whose read fails is read again without its dead
 * bytes (read_live).  The first error (a read or a write) is kept; the
 * reader stops, the writers drop what is queued, and it is returned once all
 * have joined.
 *
 * s->lock protects the queues, eof, err and done; buffers are touched
 * without it by whoever took them off a queue.
 */
#include <config.h>

#include <pthread.h>

#include "common.h"
#include "log_int.h"

#define RUN_MAX (1u << 20)  /* bytes per read request */
#define GAP_MAX (64u << 10) /* dead bytes read through */
#define MAX_WRITERS 16

struct rbuf {
  struct rbuf *next;
  unsigned char *data;  /* RUN_MAX bytes from off */
  struct replay_blk *b; /* the run's blocks; off: in data */
  uint32_t n;
};

struct stream {
  struct hhc_dev *dev;
  const struct log_sink *sink;
  uint32_t bs;
  pthread_mutex_t lock; /* protects the fields below */
  pthread_cond_t cond;  /* a queue, eof or err changed */
  struct rbuf *free, *full, **full_tail;
  bool eof;          /* the reader queues nothing more */
  int err;           /* the first error */
  uint64_t done;     /* blocks written */
  uint64_t reported; /* done at the last progress (the reader's) */
};

static int
by_lba (const void *a, const void *b)
{
  uint64_t x = ((const struct replay_blk *)a)->lba;
  uint64_t y = ((const struct replay_blk *)b)->lba;

  return (x > y) - (x < y);
}

/* One run, its blocks gathered in LBA order, as few writes as the
 * sink's limits allow.
 */
static int
write_run (struct stream *s, struct rbuf *rb, unsigned char *gather)
{
  const struct log_sink *k = s->sink;
  uint32_t max = k->max_blocks ? k->max_blocks : UINT32_MAX;
  int r = 0;

  qsort (rb->b, rb->n, sizeof *rb->b, by_lba);
  for (uint32_t i = 0; i < rb->n; i++)
    memcpy (gather + (size_t)i * s->bs, rb->data + rb->b[i].off, s->bs);
  for (uint32_t i = 0, e; i < rb->n && r == 0; i = e)
    {
      for (e = i + 1; e < rb->n && e - i < max; e++)
        if (rb->b[e].lba != rb->b[e - 1].lba + 1
            || (k->chunk && rb->b[e].lba % k->chunk == 0))
          break;
      r = k->write (k->opaque, gather + (size_t)i * s->bs, rb->b[i].lba, e - i);
    }
  return r;
}

static void *
stream_writer (void *arg)
{
  struct stream *s = arg;
  HHC_CLEANUP_FREE unsigned char *gather = hhc_alloc_aligned (RUN_MAX);

  for (;;)
    {
      struct rbuf *rb;
      int r;
      hhc_lock (&s->lock);
      while (s->full == NULL && !s->eof && s->err == 0)
        pthread_cond_wait (&s->cond, &s->lock);
      if (gather == NULL && s->err == 0)
        s->err = ENOMEM;
      if (s->err || s->full == NULL)
        {
          pthread_cond_broadcast (&s->cond);
          hhc_unlock (&s->lock);
          return NULL;
        }
      rb = s->full;
      if ((s->full = rb->next) == NULL)
        s->full_tail = &s->full;
      hhc_unlock (&s->lock);
      r = write_run (s, rb, gather);
      hhc_lock (&s->lock);
      if (r && s->err == 0)
        s->err = r;
      s->done += rb->n;
      rb->next = s->free;
      s->free = rb;
      pthread_cond_broadcast (&s->cond);
      hhc_unlock (&s->lock);
    }
}

/* The blocks of the next run from v[*i] on into rb; its device
 * offset and length.
 */
static void
fill_run (struct stream *s, const struct replay_blk *v, size_t n, size_t *i,
          struct rbuf *rb, uint64_t *off, size_t *len)
{
  uint64_t start = v[*i].off, end = start;

  rb->n = 0;
  do
    {
      rb->b[rb->n].off = v[*i].off - start;
      rb->b[rb->n++].lba = v[*i].lba;
      end = v[*i].off + s->bs;
      (*i)++;
    }
  while (*i < n && v[*i].off + s->bs - start <= RUN_MAX
         && v[*i].off - end <= GAP_MAX);
  *off = start;
  *len = end - start;
}

/* Progress, if the writers got further since the last report (the
 * reader's thread, without the lock).
 */
static void
report (struct stream *s, uint64_t total)
{
  uint64_t done;

  hhc_lock (&s->lock);
  done = s->done;
  hhc_unlock (&s->lock);
  if (s->sink->progress && done != s->reported && done < total)
    s->sink->progress (s->sink->opaque, done, total);
  s->reported = done;
}

/* A free buffer (NULL: an error stopped the replay), reporting
 * progress while it waits.
 */
static struct rbuf *
take_free (struct stream *s, uint64_t total)
{
  struct rbuf *rb;

  hhc_lock (&s->lock);
  while (s->free == NULL && s->err == 0)
    {
      if (s->done != s->reported)
        {
          hhc_unlock (&s->lock);
          report (s, total);
          hhc_lock (&s->lock);
          continue;
        }
      pthread_cond_wait (&s->cond, &s->lock);
    }
  rb = s->err ? NULL : s->free;
  if (rb)
    s->free = rb->next;
  hhc_unlock (&s->lock);
  return rb;
}

static void
queue_full (struct stream *s, struct rbuf *rb)
{
  hhc_lock (&s->lock);
  rb->next = NULL;
  *s->full_tail = rb;
  s->full_tail = &rb->next;
  pthread_cond_broadcast (&s->cond);
  hhc_unlock (&s->lock);
}

/* A run whose read failed, again without its dead bytes: each range
 * of adjacent live blocks on its own.  A dead byte read through may be
 * unreadable (free space past the tail, where the crash may have torn
 * a write; the scan's read ahead falls back to exact reads there) and
 * holds nothing we need.
 */
static int
read_live (struct stream *s, struct rbuf *rb, uint64_t off)
{
  int r = 0;

  for (uint32_t i = 0, e; i < rb->n && r == 0; i = e)
    {
      for (e = i + 1; e < rb->n; e++)
        if (rb->b[e].off != rb->b[e - 1].off + s->bs)
          break;
      r = dev_pread (s->dev, rb->data + rb->b[i].off, (size_t)(e - i) * s->bs,
                     off + rb->b[i].off);
    }
  return r;
}

/* The reader: every run read and queued, or an error. */
static void
read_runs (struct stream *s, const struct replay_blk *v, size_t n,
           uint64_t *reads)
{
  for (size_t i = 0; i < n;)
    {
      struct rbuf *rb = take_free (s, n);
      uint64_t off;
      size_t len;
      int r;
      if (rb == NULL)
        break;
      fill_run (s, v, n, &i, rb, &off, &len);
      (*reads)++;
      r = dev_pread (s->dev, rb->data, len, off);
      if (r && len > (size_t)rb->n * s->bs)
        r = read_live (s, rb, off);
      if (r)
        {
          hhc_lock (&s->lock);
          if (s->err == 0)
            s->err = r;
          rb->next = s->free;
          s->free = rb;
          pthread_cond_broadcast (&s->cond);
          hhc_unlock (&s->lock);
          break;
        }
      queue_full (s, rb);
      report (s, n);
    }
  hhc_lock (&s->lock);
  s->eof = true;
  pthread_cond_broadcast (&s->cond);
  hhc_unlock (&s->lock);
}

static void
free_bufs (struct rbuf *rb)
{
  while (rb)
    {
      struct rbuf *next = rb->next;
      free (rb->data);
      free (rb->b);
      free (rb);
      rb = next;
    }
}

/* nbuf buffers onto s->free: 0 or ENOMEM. */
static int
alloc_bufs (struct stream *s, unsigned nbuf)
{
  for (unsigned i = 0; i < nbuf; i++)
    {
      struct rbuf *rb = calloc (1, sizeof *rb);
      if (rb == NULL)
        return ENOMEM;
      rb->next = s->free;
      s->free = rb;
      rb->data = hhc_alloc_aligned (RUN_MAX);
      rb->b = malloc ((RUN_MAX / s->bs) * sizeof *rb->b);
      if (rb->data == NULL || rb->b == NULL)
        return ENOMEM;
    }
  return 0;
}

int
replay_stream (struct hhc_dev *dev, uint32_t bs, const struct replay_blk *v,
               size_t n, const struct log_sink *sink, uint64_t *reads)
{
  struct stream s = { .dev = dev, .sink = sink, .bs = bs };
  unsigned nw = HHC_MIN (HHC_MAX (sink->writers, 1u), MAX_WRITERS);
  pthread_t th[MAX_WRITERS];
  unsigned started = 0;
  int r;

  *reads = 0;
  if (n == 0)
    return 0;
  pthread_mutex_init (&s.lock, NULL);
  pthread_cond_init (&s.cond, NULL);
  s.full_tail = &s.full;
  r = alloc_bufs (&s, nw + 2);
  for (unsigned i = 0; r == 0 && i < nw; i++)
    if (pthread_create (&th[started], NULL, stream_writer, &s) == 0)
      started++;
  if (r == 0 && started == 0)
    r = EAGAIN;
  if (r == 0)
    read_runs (&s, v, n, reads);
  for (unsigned i = 0; i < started; i++)
    pthread_join (th[i], NULL);
  if (r == 0)
    r = s.err;
  if (r == 0 && sink->progress)
    sink->progress (sink->opaque, n, n);
  free_bufs (s.free);
  free_bufs (s.full);
  pthread_cond_destroy (&s.cond);
  pthread_mutex_destroy (&s.lock);
  return r;
}
