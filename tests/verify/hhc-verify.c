/* hhc-verify: a verifying workload for crash and fault campaigns.
 *
 *   hhc-verify write URI JOURNAL [options]
 *   hhc-verify check URI JOURNAL [--state-out STATE]
 *
 * write: WRITERS connections (one thread and one libnbd handle each)
 * write blocks of BS bytes whose content names the block's LBA, the
 * writer, the writer's sequence number and the run, filled with bytes
 * derived from them and closed by a crc32c.  Writer w owns the LBAs
 * with lba % WRITERS == w, so each LBA has one writer and its writes
 * have one order.  Every FLUSH_EVERY writes a writer sends an NBD FLUSH;
 * every FUA_EVERY-th write carries FUA; with --zero-every N every N-th
 * write is an NBD WRITE_ZEROES of the block instead (its content: all
 * zeros).  The run ends after OPS writes per writer, after SECONDS, or
 * when the server goes away (the crash the campaign caused: with
 * --expect-crash that is no error).  A request that fails while the
 * connection stays up ends the run too, unless --tolerate-errors: then
 * a failed write counts as not completed, a failed FLUSH covers
 * nothing (it is no acknowledgement: the writes before it are not
 * promised by it), and the writer goes on.  Then JOURNAL records, per
 * writer, every write issued (LBA, sequence number, whether it
 * completed and with FUA; zeros as 'z' lines) and the last sequence
 * number covered by a successful flush.  With --state STATE the blocks
 * a previous check accepted are the base line.
 *
 * check: reads every block of the journal's region and checks it:
 *   - a write that completed before a successful FLUSH of its writer,
 *     or completed with FUA, must be there, or a later write of the
 *     same LBA (completed or not: a write in flight may land);
 *   - without such a write, the block holds the base line (zeros, or
 *     the state's block) or any write of this run to that LBA;
 *   - a zeros write is there when the block reads as zeros;
 *   - a block must never hold content that was not written to its LBA,
 *     nor fail its checksum.
 * It prints one line per bad block (at most 20) and a summary, sends a
 * FLUSH (what it read becomes the base line of the next round), writes
 * the accepted contents to --state-out, and exits 1 if any block was
 * lost or corrupt.
 *
 * Flush semantics assumed: an NBD FLUSH covers the writes of the same
 * connection that completed before it was sent (a writer's writes are
 * synchronous, so all its earlier ones).
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "common.h" /* get64, put32, put64 */
#include "crc32c.h"

#define MAGIC "HHCVRFY1"
#define HDR 40 /* magic 8, lba 8, writer 4, pad 4, seq 8, run 8 */

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

/* Base line of a block: a write of an earlier run, or zeros. */
struct base {
  uint64_t run, seq;
  uint32_t writer;
  bool set;
};

static const char *uri;
static unsigned nwriters = 4;
static uint32_t bs = 4096;
static uint64_t nblocks;
static uint64_t ops = 1000;
static unsigned seconds = 0;
static unsigned flush_every = 16;
static unsigned fua_every = 0;
static unsigned zero_every = 0;
static bool tolerate_errors;
static uint64_t seed = 1;
static uint64_t run;
static bool expect_crash;
static const char *ready_file; /* made once every writer is connected */
static unsigned nconnected;
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static struct base *bases; /* nblocks */
static struct writer *writers;
static time_t deadline;

static uint64_t
mix (uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* The content of write (run, writer, seq) of LBA. */
static void
make_block (unsigned char *b, uint64_t lba, uint32_t writer, uint64_t seq,
            uint64_t r)
{
  uint64_t x = mix (lba ^ mix (seq ^ mix (r + writer)));
  unsigned char t[8];
  uint32_t i;

  memcpy (b, MAGIC, 8);
  put64 (b + 8, lba);
  put64 (b + 16, writer);
  put64 (b + 24, seq);
  put64 (b + 32, r);
  /* Every byte up to the crc: bs - 4 - HDR is 4 more than a multiple of
   * 8, and a tail left as it was would be whatever malloc gave this
   * buffer (the writer's and the checker's differ: every block fails).
   */
  for (i = HDR; i < bs - 4; i += 8)
    {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      put64 (t, x);
      memcpy (b + i, t, HHC_MIN (8u, bs - 4 - i));
    }
  put32 (b + bs - 4, crc32c (0, b, bs - 4));
}

/* Where block LBA as read (got) differs from the block its header
 * names (want): the first and last differing byte, how many differ, and
 * 16 bytes of each from the first difference.
 */
static void
diff_block (uint64_t lba, const unsigned char *got, const unsigned char *want)
{
  uint32_t first = bs, last = 0, n = 0;

  for (uint32_t i = 0; i < bs; i++)
    if (got[i] != want[i])
      {
        if (first == bs)
          first = i;
        last = i;
        n++;
      }
  if (first == bs)
    return;
  fprintf (stderr,
           "hhc-verify: block %" PRIu64 ": %" PRIu32 " of %" PRIu32
           " bytes differ, first at %" PRIu32 ", last at %" PRIu32
           " (header lba %" PRIu64 ")\n",
           lba, n, bs, first, last, get64 (got + 8));
  for (int k = 0; k < 2; k++)
    {
      const unsigned char *p = k ? got : want;
      fprintf (stderr, "hhc-verify:   %s @%" PRIu32 ":", k ? "got " : "want",
               first);
      for (uint32_t i = first; i < first + 16 && i < bs; i++)
        fprintf (stderr, " %02x", p[i]);
      fprintf (stderr, "\n");
    }
}

static struct nbd_handle *
connect_or_die (void)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL || nbd_connect_uri (h, uri) == -1)
    {
      fprintf (stderr, "hhc-verify: %s: %s\n", uri, nbd_get_error ());
      exit (2);
    }
  return h;
}

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

static void *
writer_thread (void *p)
{
  struct writer *w = p;
  struct nbd_handle *h = connect_or_die ();
  unsigned char *b = malloc (bs);

  /* The campaign times its fault from here: a kill before a writer
   * connected was a refused connection, not a crash under load.
   */
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
      uint64_t lba = (rng % per) * nwriters + w->id;
      uint64_t seq = w->n + 1;
      bool fua = fua_every && seq % fua_every == 0;
      bool zero = zero_every && seq % zero_every == 0;
      if (w->n == w->cap)
        {
          w->cap = w->cap ? 2 * w->cap : 1024;
          w->w = realloc (w->w, w->cap * sizeof *w->w);
          if (w->w == NULL)
            abort ();
        }
      w->w[w->n++]
          = (struct wr){ .lba = lba, .seq = seq, .fua = fua, .zero = zero };
      make_block (b, lba, w->id, seq, run);
      uint32_t flags = fua ? LIBNBD_CMD_FLAG_FUA : 0;
      int rc = zero ? nbd_zero (h, bs, lba * bs, flags)
                    : nbd_pwrite (h, b, bs, lba * bs, flags);
      if (rc == -1)
        {
          if (request_failed (h, w, &w->failed_writes, "write"))
            continue;
          break;
        }
      w->w[w->n - 1].done = true;
      if (flush_every && ++since_flush == flush_every)
        {
          since_flush = 0;
          if (nbd_flush (h, 0) == -1)
            {
              if (request_failed (h, w, &w->failed_flushes, "flush"))
                continue;
              break;
            }
          w->flushed_seq = seq;
        }
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

static int
do_write (const char *journal, const char *state)
{
  struct nbd_handle *h = connect_or_die ();
  int64_t size = nbd_get_size (h);
  FILE *f;
  unsigned gone = 0;

  nbd_close (h);
  if (size < 0 || (uint64_t)size < (uint64_t)bs * nwriters)
    {
      fprintf (stderr, "hhc-verify: %s: too small\n", uri);
      return 2;
    }
  if (nblocks == 0 || nblocks > (uint64_t)size / bs)
    nblocks = size / bs;
  nblocks -= nblocks % nwriters;
  bases = calloc (nblocks, sizeof *bases);
  if (bases == NULL)
    abort ();
  if (state)
    load_state (state);
  /* A run id of its own even for the same seed in the same second: a
   * block of an earlier run must never pass for one of this run.
   */
  {
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    run = mix (seed ^ mix ((uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec)
               ^ mix (getpid ()))
          | 1;
  }
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

  f = fopen (journal, "w");
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
      struct writer *w = &writers[i];
      fprintf (f, "f %u %" PRIu64 "\n", i, w->flushed_seq);
      for (size_t k = 0; k < w->n; k++)
        fprintf (f, "%c %u %" PRIu64 " %" PRIu64 " %d %d\n",
                 w->w[k].zero ? 'z' : 'w', i, w->w[k].lba, w->w[k].seq,
                 w->w[k].done, w->w[k].fua);
      if (w->gone)
        {
          gone++;
          fprintf (stderr, "hhc-verify: writer %u: %s\n", i, w->err);
        }
    }
  if (fclose (f) != 0)
    {
      perror (journal);
      return 2;
    }
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
  for (unsigned i = 0; i < nwriters; i++)
    free (writers[i].w);
  free (writers);
  free (bases);
  if (gone && !expect_crash)
    return 1;
  return 0;
}

/* Per LBA in check: the writes of this run, and what must be there. */
struct lbainfo {
  uint64_t required; /* seq of the newest durable write, 0: none */
  uint64_t maxseq;   /* newest write issued */
  uint64_t *seqs;    /* all data writes issued, in order */
  size_t nseqs;
  uint64_t maxzero; /* newest zeros write issued, 0: none */
};

static int
do_check (const char *journal, const char *state_out)
{
  FILE *f = fopen (journal, "r");
  char kind;
  unsigned jw;
  uint64_t flushed[256] = { 0 };
  struct lbainfo *info;
  struct nbd_handle *h;
  unsigned char *b, *want;
  uint64_t lost = 0, corrupt = 0, ok = 0, zero = 0, printed = 0;
  FILE *so = NULL;

  if (f == NULL)
    {
      perror (journal);
      return 2;
    }
  if (fscanf (f, "hhc-verify 1 %" SCNu32 " %" SCNu64 " %u %" SCNu64 "\n", &bs,
              &nblocks, &jw, &run)
          != 4
      || jw == 0 || jw > 256 || bs < 512 || bs % 512)
    {
      fprintf (stderr, "hhc-verify: %s: not a journal\n", journal);
      return 2;
    }
  nwriters = jw;
  bases = calloc (nblocks, sizeof *bases);
  info = calloc (nblocks, sizeof *info);
  if (bases == NULL || info == NULL)
    abort ();
  /* Two passes over the writes: flush marks come before them. */
  while (fscanf (f, " %c", &kind) == 1)
    {
      uint64_t lba, r, seq;
      uint32_t wr;
      unsigned w;
      int done, fua;
      switch (kind)
        {
        case 'b':
          if (fscanf (f, "%" SCNu64 " %" SCNu64 " %" SCNu32 " %" SCNu64, &lba,
                      &r, &wr, &seq)
                  != 4
              || lba >= nblocks)
            goto bad;
          bases[lba] = (struct base){
            .run = r, .seq = seq, .writer = wr, .set = true
          };
          break;
        case 'f':
          if (fscanf (f, "%u %" SCNu64, &w, &seq) != 2 || w >= nwriters)
            goto bad;
          flushed[w] = seq;
          break;
        case 'w':
        case 'z':
          if (fscanf (f, "%u %" SCNu64 " %" SCNu64 " %d %d", &w, &lba, &seq,
                      &done, &fua)
                  != 5
              || w >= nwriters || lba >= nblocks || lba % nwriters != w)
            goto bad;
          {
            struct lbainfo *in = &info[lba];
            if (kind == 'z')
              in->maxzero = seq;
            else
              {
                in->seqs
                    = realloc (in->seqs, (in->nseqs + 1) * sizeof *in->seqs);
                if (in->seqs == NULL)
                  abort ();
                in->seqs[in->nseqs++] = seq;
              }
            in->maxseq = seq;
            if (done && (fua || seq <= flushed[w]))
              in->required = seq;
          }
          break;
        default:
          goto bad;
        }
    }
  fclose (f);

  h = connect_or_die ();
  b = malloc (bs);
  want = malloc (bs);
  if (b == NULL || want == NULL)
    abort ();
  if (state_out)
    {
      so = fopen (state_out, "w");
      if (so == NULL)
        {
          perror (state_out);
          return 2;
        }
    }
  for (uint64_t lba = 0; lba < nblocks; lba++)
    {
      struct lbainfo *in = &info[lba];
      const char *why = NULL;
      uint64_t seq = 0, r = 0;
      uint32_t wr = 0;
      bool is_zero;

      if (nbd_pread (h, b, bs, lba * bs, 0) == -1)
        {
          fprintf (stderr, "hhc-verify: read of block %" PRIu64 ": %s\n", lba,
                   nbd_get_error ());
          return 2;
        }
      is_zero = b[0] == 0 && memcmp (b, b + 1, bs - 1) == 0;
      if (is_zero)
        {
          /* A zeros write of this run, as new as what must be there. */
          if (in->maxzero && in->maxzero >= in->required)
            zero++;
          else if (in->required)
            why = "lost: zeros where a flushed write must be";
          else if (bases[lba].set)
            why = "lost: zeros where the base line had data";
          else
            zero++;
        }
      else
        {
          seq = get64 (b + 24);
          r = get64 (b + 32);
          wr = get64 (b + 16);
          make_block (want, lba, wr, seq, r);
          if (memcmp (b, want, bs) != 0)
            {
              why = "corrupt: not a block written to this LBA";
              if (corrupt == 0)
                diff_block (lba, b, want);
            }
          else if (r == run)
            {
              bool issued = false;
              for (size_t k = 0; k < in->nseqs; k++)
                issued |= in->seqs[k] == seq;
              if (!issued || wr != lba % nwriters)
                why = "corrupt: a write never issued to this LBA";
              else if (seq < in->required)
                why = "lost: older than a flushed write";
            }
          else if (!bases[lba].set || bases[lba].run != r
                   || bases[lba].seq != seq || bases[lba].writer != wr)
            why = "corrupt: another run's block that was not the base line";
          else if (in->required)
            why = "lost: the base line where a flushed write must be";
        }
      if (why)
        {
          if (why[0] == 'l')
            lost++;
          else
            corrupt++;
          if (printed++ < 20)
            fprintf (stderr,
                     "hhc-verify: block %" PRIu64 ": %s (found run %" PRIx64
                     " writer %" PRIu32 " seq %" PRIu64
                     "; required seq %" PRIu64 ", newest issued %" PRIu64 ")\n",
                     lba, why, r, wr, seq, in->required, in->maxseq);
        }
      else
        {
          if (!is_zero)
            ok++;
          if (so && !is_zero)
            fprintf (so, "%" PRIu64 " %" PRIu64 " %" PRIu32 " %" PRIu64 "\n",
                     lba, r, wr, seq);
        }
    }
  if (nbd_flush (h, 0) == -1)
    {
      fprintf (stderr, "hhc-verify: flush: %s\n", nbd_get_error ());
      return 2;
    }
  nbd_shutdown (h, 0);
  nbd_close (h);
  if (so && fclose (so) != 0)
    {
      perror (state_out);
      return 2;
    }
  printf ("hhc-verify: checked %" PRIu64 " blocks: %" PRIu64 " data, %" PRIu64
          " zero, %" PRIu64 " lost, %" PRIu64 " corrupt\n",
          nblocks, ok, zero, lost, corrupt);
  for (uint64_t lba = 0; lba < nblocks; lba++)
    free (info[lba].seqs);
  free (info);
  free (bases);
  free (b);
  free (want);
  return lost || corrupt ? 1 : 0;

bad:
  fprintf (stderr, "hhc-verify: %s: malformed journal\n", journal);
  return 2;
}

static void
usage (void)
{
  fprintf (stderr,
           "usage: hhc-verify write URI JOURNAL [--writers N] [--bs BYTES]\n"
           "         [--blocks N] [--ops N] [--seconds S] [--flush-every N]\n"
           "         [--fua-every N] [--zero-every N] [--seed N]\n"
           "         [--state STATE] [--expect-crash] [--tolerate-errors]\n"
           "         [--ready FILE]\n"
           "       hhc-verify check URI JOURNAL [--state-out STATE]\n");
  exit (2);
}

int
main (int argc, char *argv[])
{
  static const struct option lopts[] = {
    { "writers", 1, NULL, 'w' },
    { "bs", 1, NULL, 'b' },
    { "blocks", 1, NULL, 'n' },
    { "ops", 1, NULL, 'o' },
    { "seconds", 1, NULL, 's' },
    { "flush-every", 1, NULL, 'f' },
    { "fua-every", 1, NULL, 'F' },
    { "zero-every", 1, NULL, 'z' },
    { "tolerate-errors", 0, NULL, 'E' },
    { "seed", 1, NULL, 'S' },
    { "state", 1, NULL, 't' },
    { "state-out", 1, NULL, 'T' },
    { "expect-crash", 0, NULL, 'x' },
    { "ready", 1, NULL, 'r' },
    { NULL, 0, NULL, 0 },
  };
  const char *state = NULL, *state_out = NULL;
  int c;

  while ((c = getopt_long (argc, argv, "", lopts, NULL)) != -1)
    switch (c)
      {
      case 'w':
        nwriters = strtoul (optarg, NULL, 0);
        break;
      case 'b':
        bs = strtoul (optarg, NULL, 0);
        break;
      case 'n':
        nblocks = strtoull (optarg, NULL, 0);
        break;
      case 'o':
        ops = strtoull (optarg, NULL, 0);
        break;
      case 's':
        seconds = strtoul (optarg, NULL, 0);
        break;
      case 'f':
        flush_every = strtoul (optarg, NULL, 0);
        break;
      case 'F':
        fua_every = strtoul (optarg, NULL, 0);
        break;
      case 'z':
        zero_every = strtoul (optarg, NULL, 0);
        break;
      case 'E':
        tolerate_errors = true;
        break;
      case 'S':
        seed = strtoull (optarg, NULL, 0);
        break;
      case 't':
        state = optarg;
        break;
      case 'T':
        state_out = optarg;
        break;
      case 'x':
        expect_crash = true;
        break;
      case 'r':
        ready_file = optarg;
        break;
      default:
        usage ();
      }
  if (argc - optind != 3 || nwriters == 0 || nwriters > 256 || bs < 512
      || bs % 512)
    usage ();
  uri = argv[optind + 1];
  if (strcmp (argv[optind], "write") == 0)
    return do_write (argv[optind + 2], state);
  if (strcmp (argv[optind], "check") == 0)
    return do_check (argv[optind + 2], state_out);
  usage ();
}
