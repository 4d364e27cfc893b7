/* powercut-apply IMAGE JOURNAL SEED [KEEP-PERCENT [BAD-FILE]]
 *
 * Play a power cut on IMAGE, whose powercut server was killed (see
 * powercut.h): roll back every journalled write, newest first, then
 * replay in order the durable ones (FUA writes, and every write before
 * a flush the kill interrupted) and a random subset of the others
 * (each kept with probability KEEP-PERCENT, default 50; one in eight
 * of the kept ones torn: only its first K physical sectors of 4 KiB,
 * the unit that today's disks write atomically).  With BAD-FILE (an
 * HDD: the plugin's bad=, the medium's unreadable ranges), one lost
 * write is torn, as an interrupted write can be: the newest, a quarter
 * of the time an older one (the disk's cache wrote out of order); all
 * of it, or half the time a run of its 4 KiB pieces, is unreadable
 * from its place on, and every write replayed (before it or after)
 * heals what it covers.  Empties JOURNAL.  Prints how many writes were
 * kept, torn and dropped, and what the tear left unreadable.
 */
#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "powercut.h"

/* A disk's atomic write unit (4 KiB physical sectors). */
#define TEAR 4096

struct w {
  struct powercut_rec rec;
  char *old, *new;
  uint32_t len; /* what the cut lets land: 0 (lost) up to rec.length */
};

struct journal {
  struct w *ws;
  size_t n, cap;
  size_t durable; /* records before the last flush marker */
};

static uint64_t rng;

static uint64_t
next (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* One record of j into jl: 1 read, 0 at its end (or at a record the
 * kill cut short: the plugin writes the journal before the image, so
 * the image never saw it), -1 out of memory.
 */
static int
read_record (FILE *j, struct journal *jl)
{
  struct powercut_rec rec;
  char *old, *new;

  if (fread (&rec, 1, sizeof rec, j) != sizeof rec
      || rec.magic != POWERCUT_MAGIC)
    return 0;
  if (rec.flags & POWERCUT_FLUSH)
    {
      jl->durable = jl->n; /* a flush began: every earlier write */
      return 1;
    }
  old = malloc (rec.length);
  new = malloc (rec.length);
  if (old == NULL || new == NULL || fread (old, 1, rec.length, j) != rec.length
      || fread (new, 1, rec.length, j) != rec.length)
    {
      free (old);
      free (new);
      return old && new ? 0 : -1;
    }
  if (jl->n == jl->cap)
    {
      jl->cap = jl->cap ? 2 * jl->cap : 64;
      jl->ws = realloc (jl->ws, jl->cap * sizeof *jl->ws);
      if (jl->ws == NULL)
        return -1;
    }
  jl->ws[jl->n++] = (struct w){ rec, old, new, 0 };
  return 1;
}

/* Decide what lands of each write (w->len); the lost ones' indices in
 * lost.  Returns how many the cut tore short.
 */
static size_t
decide (struct journal *jl, unsigned keep, size_t *lost, size_t *nlost)
{
  size_t torn = 0;

  for (size_t i = 0; i < jl->n; i++)
    {
      struct w *w = &jl->ws[i];
      bool durable = i < jl->durable || (w->rec.flags & POWERCUT_DURABLE);
      w->len = w->rec.length;
      if (!durable && next () % 100 >= keep)
        {
          w->len = 0;
          lost[(*nlost)++] = i;
        }
      else if (!durable && w->len > TEAR && next () % 8 == 0)
        {
          w->len = TEAR * (1 + next () % (w->len / TEAR));
          if (w->len > w->rec.length)
            w->len = w->rec.length;
          torn++;
        }
    }
  return torn;
}

/* The range of lost write w the tear leaves unreadable. */
static void
tear_range (const struct w *w, uint64_t *off, uint64_t *len)
{
  uint64_t n = w->rec.length / TEAR;

  *off = w->rec.offset;
  *len = w->rec.length;
  if (n > 1 && *len % TEAR == 0 && next () % 2)
    {
      uint64_t first = next () % n;
      *off += first * TEAR;
      *len = TEAR * (1 + next () % (n - first));
    }
}

/* Replay what lands, in order, healing bad; the write at victim
 * (SIZE_MAX: none) tears at its place.  -1 on an error.
 */
static int
replay (int fd, const struct journal *jl, struct pc_bad *bad, size_t victim)
{
  for (size_t i = 0; i < jl->n; i++)
    {
      const struct w *w = &jl->ws[i];
      if (w->len && pwrite (fd, w->new, w->len, w->rec.offset) < 0)
        return -1;
      pc_bad_heal (bad, w->rec.offset, w->len);
      if (i == victim)
        {
          uint64_t off, len;
          tear_range (w, &off, &len);
          if (pc_bad_add (bad, off, len) == -1)
            {
              fprintf (stderr,
                       "powercut-apply: more than %d unreadable "
                       "ranges\n",
                       PC_BAD_MAX);
              return -1;
            }
          printf (", %" PRIu64 "+%" PRIu64 " unreadable", off, len);
        }
    }
  return 0;
}

/* Roll the image back, then play the cut (see the top). */
static int
play (int fd, struct journal *jl, unsigned keep, const char *badfile)
{
  struct pc_bad bad = { 0 };
  size_t *lost = calloc (jl->n + 1, sizeof *lost), nlost = 0, torn, victim;

  if (lost == NULL || (badfile && pc_bad_load (badfile, &bad) == -1))
    return -1;
  for (size_t i = jl->n; i-- > 0;)
    if (pwrite (fd, jl->ws[i].old, jl->ws[i].rec.length, jl->ws[i].rec.offset)
        < 0)
      return -1;
  torn = decide (jl, keep, lost, &nlost);
  victim = !badfile || nlost == 0          ? SIZE_MAX
           : nlost > 1 && next () % 4 == 0 ? lost[next () % (nlost - 1)]
                                           : lost[nlost - 1];
  printf ("powercut: %zu unflushed writes: %zu kept (%zu torn), %zu lost",
          jl->n, jl->n - nlost, torn, nlost);
  free (lost);
  if (replay (fd, jl, &bad, victim) == -1
      || (badfile && pc_bad_save (badfile, &bad) == -1))
    return -1;
  printf ("\n");
  return 0;
}

int
main (int argc, char *argv[])
{
  struct journal jl = { 0 };
  unsigned keep = argc > 4 ? atoi (argv[4]) : 50;
  const char *badfile = argc > 5 ? argv[5] : NULL;
  FILE *j;
  int fd, r;

  if (argc < 4)
    {
      fprintf (stderr, "usage: powercut-apply IMAGE JOURNAL SEED "
                       "[KEEP%% [BAD-FILE]]\n");
      return 2;
    }
  rng = strtoull (argv[3], NULL, 0) * 2654435761ULL + 88172645463325252ULL;
  fd = open (argv[1], O_RDWR);
  j = fopen (argv[2], "r");
  if (fd == -1 || j == NULL)
    {
      perror ("powercut-apply: open");
      return 2;
    }
  while ((r = read_record (j, &jl)) == 1)
    ;
  fclose (j);
  if (r == -1 || play (fd, &jl, keep, badfile) == -1 || fsync (fd) == -1
      || close (fd) == -1 || truncate (argv[2], 0) == -1)
    {
      perror ("powercut-apply");
      return 2;
    }
  for (size_t i = 0; i < jl.n; i++)
    {
      free (jl.ws[i].old);
      free (jl.ws[i].new);
    }
  free (jl.ws);
  return 0;
}
