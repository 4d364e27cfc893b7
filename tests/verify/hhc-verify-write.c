/* hhc-verify write: the load of WRITERS connections and the journal
 * of what they wrote (hhc-verify.c says what a run writes and records).
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "hhc-verify.h"

struct wr {
  uint64_t lba;
  uint64_t seq;
  bool done, fua, zero;
};

struct writer {
  unsigned id;
  pthread_t tid;
  struct wr *w;
  size_t n, cap;
  uint64_t flushed_seq; /* writes with seq <= this are flushed (0: none) */
  bool gone;            /* the server went away (or an error ended it) */
  uint64_t failed_writes, failed_flushes; /* --tolerate-errors */
  char err[256];
};

static unsigned nconnected;
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static struct writer *writers;
static time_t deadline;

/* A request of writer w failed: true to go on (--tolerate-errors, and
 * the server answered with an error), false to end the run (the server
 * went away, or errors are not tolerated), with w->err set.
 */
static bool
request_failed (struct nbd_handle *h, struct writer *w, uint64_t *count,
                const char *what)
{
  if (tolerate_errors && !nbd_aio_is_dead (h) && !nbd_aio_is_closed (h))
    {
      (*count)++;
      return true;
    }
  snprintf (w->err, sizeof w->err, "%s: %s", what, nbd_get_error ());
  w->gone = true;
  return false;
}

/* One more writer connected; once all are, the ready file is made.
 * The campaign times its fault from there: a kill before a writer
 * connected was a refused connection, not a crash under load.
 */
static void
mark_connected (void)
{
  pthread_mutex_lock (&ready_lock);
  if (++nconnected == nwriters && ready_file)
    {
      FILE *rf = fopen (ready_file, "w");
      if (rf == NULL || fclose (rf) != 0)
        {
          perror (ready_file);
          exit (2);
        }
    }
  pthread_mutex_unlock (&ready_lock);
}

/* Writer w's journal: one more write, not yet completed. */
static void
record_write (struct writer *w, uint64_t lba, uint64_t seq, bool fua, bool zero)
{
  if (w->n == w->cap)
    {
      w->cap = w->cap ? 2 * w->cap : 1024;
      w->w = realloc (w->w, w->cap * sizeof *w->w);
      if (w->w == NULL)
        abort ();
    }
  w->w[w->n++]
      = (struct wr){ .lba = lba, .seq = seq, .fua = fua, .zero = zero };
}

/* Writer w's next write, of block LBA (B: its buffer), and the FLUSH
 * after it if one is due (*SINCE_FLUSH: writes since the last): false
 * to end the run (request_failed).
 */
static bool
write_one (struct nbd_handle *h, struct writer *w, unsigned char *b,
           uint64_t lba, uint64_t *since_flush)
{
  uint64_t seq = w->n + 1;
  bool fua = fua_every && seq % fua_every == 0;
  bool zero = zero_every && seq % zero_every == 0;
  uint32_t flags = fua ? LIBNBD_CMD_FLAG_FUA : 0;
  int rc;

  record_write (w, lba, seq, fua, zero);
  make_block (b, lba, w->id, seq, run);
  rc = zero ? nbd_zero (h, bs, lba * bs, flags)
            : nbd_pwrite (h, b, bs, lba * bs, flags);
  if (rc == -1)
    return request_failed (h, w, &w->failed_writes, "write");
  w->w[w->n - 1].done = true;
  if (flush_every && ++*since_flush == flush_every)
    {
      *since_flush = 0;
      if (nbd_flush (h, 0) == -1)
        return request_failed (h, w, &w->failed_flushes, "flush");
      w->flushed_seq = seq;
    }
  return true;
}

static void *
writer_thread (void *p)
{
  struct writer *w = p;
  struct nbd_handle *h = connect_or_die ();
  unsigned char *b = malloc (bs);

  mark_connected ();
  uint64_t per = nblocks / nwriters;
  uint64_t rng = mix (seed * 1000003 + w->id);
  uint64_t since_flush = 0;

  if (b == NULL)
    abort ();
  for (uint64_t k = 0; k < ops; k++)
    {
      if (seconds && time (NULL) >= deadline)
        break;
      rng = mix (rng + k);
      if (!write_one (h, w, b, (rng % per) * nwriters + w->id, &since_flush))
        break;
    }
  free (b);
  nbd_shutdown (h, 0);
  nbd_close (h);
  return NULL;
}

static void
load_state (const char *path)
{
  FILE *f = fopen (path, "r");
  uint64_t lba, r, seq;
  uint32_t wr;

  if (f == NULL)
    {
      perror (path);
      exit (2);
    }
  while (fscanf (f, "%" SCNu64 " %" SCNu64 " %" SCNu32 " %" SCNu64, &lba, &r,
                 &wr, &seq)
         == 4)
    if (lba < nblocks)
      bases[lba]
          = (struct base){ .run = r, .seq = seq, .writer = wr, .set = true };
  fclose (f);
}

/* The region of the run: nblocks (--blocks, at most the export's
 * size) less what does not make a block for every writer.  0, or 2
 * (the error printed) if the export is too small.
 */
static int
size_region (void)
{
  struct nbd_handle *h = connect_or_die ();
  int64_t size = nbd_get_size (h);

  nbd_close (h);
  if (size < 0 || (uint64_t)size < (uint64_t)bs * nwriters)
    {
      fprintf (stderr, "hhc-verify: %s: too small\n", uri);
      return 2;
    }
  if (nblocks == 0 || nblocks > (uint64_t)size / bs)
    nblocks = size / bs;
  nblocks -= nblocks % nwriters;
  return 0;
}

/* A run id of its own even for the same seed in the same second: a
 * block of an earlier run must never pass for one of this run.
 */
static uint64_t
new_run_id (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return mix (seed ^ mix ((uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec)
              ^ mix (getpid ()))
         | 1;
}

/* Starts the writers and waits until each has ended. */
static void
run_writers (void)
{
  deadline = time (NULL) + seconds;
  writers = calloc (nwriters, sizeof *writers);
  for (unsigned i = 0; i < nwriters; i++)
    {
      writers[i].id = i;
      if (pthread_create (&writers[i].tid, NULL, writer_thread, &writers[i]))
        abort ();
    }
  for (unsigned i = 0; i < nwriters; i++)
    pthread_join (writers[i].tid, NULL);
}

/* Writer I's lines of the journal: its flush mark, then its writes. */
static void
journal_writer (FILE *f, unsigned i, const struct writer *w)
{
  fprintf (f, "f %u %" PRIu64 "\n", i, w->flushed_seq);
  for (size_t k = 0; k < w->n; k++)
    fprintf (f, "%c %u %" PRIu64 " %" PRIu64 " %d %d\n",
             w->w[k].zero ? 'z' : 'w', i, w->w[k].lba, w->w[k].seq,
             w->w[k].done, w->w[k].fua);
}

/* Writes JOURNAL (the header, the base lines, each writer's lines) and
 * reports each writer the server went away from (or an error ended),
 * counting them in *GONE.  0, or 2 (the error printed).
 */
static int
write_journal (const char *journal, unsigned *gone)
{
  FILE *f = fopen (journal, "w");

  if (f == NULL)
    {
      perror (journal);
      return 2;
    }
  fprintf (f, "hhc-verify 1 %" PRIu32 " %" PRIu64 " %u %" PRIu64 "\n", bs,
           nblocks, nwriters, run);
  for (uint64_t lba = 0; lba < nblocks; lba++)
    if (bases[lba].set)
      fprintf (f, "b %" PRIu64 " %" PRIu64 " %" PRIu32 " %" PRIu64 "\n", lba,
               bases[lba].run, bases[lba].writer, bases[lba].seq);
  for (unsigned i = 0; i < nwriters; i++)
    {
      journal_writer (f, i, &writers[i]);
      if (writers[i].gone)
        {
          (*gone)++;
          fprintf (stderr, "hhc-verify: writer %u: %s\n", i, writers[i].err);
        }
    }
  if (fclose (f) != 0)
    {
      perror (journal);
      return 2;
    }
  return 0;
}

/* The run's summary on stdout (GONE: writers the server went away from). */
static void
print_summary (unsigned gone)
{
  uint64_t total = 0, fw = 0, ff = 0;

  for (unsigned i = 0; i < nwriters; i++)
    {
      total += writers[i].n;
      fw += writers[i].failed_writes;
      ff += writers[i].failed_flushes;
    }
  printf ("hhc-verify: %" PRIu64 " writes by %u writers over %" PRIu64
          " blocks of %" PRIu32 "; server gone: %s",
          total, nwriters, nblocks, bs, gone ? "yes" : "no");
  if (tolerate_errors)
    printf ("; %" PRIu64 " failed writes, %" PRIu64 " failed flushes", fw, ff);
  printf ("\n");
}

int
do_write (const char *journal, const char *state)
{
  unsigned gone = 0;
  int rc = size_region ();

  if (rc != 0)
    return rc;
  bases = calloc (nblocks, sizeof *bases);
  if (bases == NULL)
    abort ();
  if (state)
    load_state (state);
  run = new_run_id ();
  run_writers ();
  rc = write_journal (journal, &gone);
  if (rc != 0)
    return rc;
  print_summary (gone);
  for (unsigned i = 0; i < nwriters; i++)
    free (writers[i].w);
  free (writers);
  free (bases);
  if (gone && !expect_crash)
    return 1;
  return 0;
}
