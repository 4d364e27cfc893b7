/* powercut-apply IMAGE JOURNAL SEED [KEEP-PERCENT [BAD-FILE]]
 *
 * Play a power cut on IMAGE, whose powercut server was killed (see
 * powercut.h): roll back every journalled write, newest first, then
 * replay in order the durable ones and a random subset of the others
 * (each kept with probability KEEP-PERCENT, default 50; one in eight
 * of the kept ones torn: only its first K physical sectors of 4 KiB,
 * the unit that today's disks write atomically).  With BAD-FILE (an
 * HDD: the plugin's bad=, the medium's unreadable ranges), the writes
 * replayed heal what they cover, and the newest write dropped leaves
 * sectors unreadable, as an interrupted write can (a quarter of the
 * time an older dropped one too): all of it, or half the time a run of
 * its 4 KiB pieces.  Empties JOURNAL.  Prints how many writes were
 * kept, torn and dropped, and what is now unreadable.
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

/* The dropped write rec leaves sectors unreadable: add them to bad. */
static void
unreadable (struct pc_bad *bad, const struct powercut_rec *rec)
{
  uint64_t off = rec->offset, len = rec->length, n = len / TEAR;

  if (n > 1 && len % TEAR == 0 && next () % 2)
    {
      uint64_t first = next () % n;
      off += first * TEAR;
      len = TEAR * (1 + next () % (n - first));
    }
  pc_bad_add (bad, off, len);
  printf (", %" PRIu64 "+%" PRIu64 " unreadable", off, len);
}

/* The medium after the cut: the writes replayed healed what they
 * covered (done), the dropped ones tear; save it.
 */
static int
tear (const char *badfile, struct pc_bad *bad, const struct w *ws,
      const size_t *lost, size_t nlost)
{
  if (nlost > 0)
    unreadable (bad, &ws[lost[nlost - 1]].rec);
  if (nlost > 1 && next () % 4 == 0)
    unreadable (bad, &ws[lost[next () % (nlost - 1)]].rec);
  return pc_bad_save (badfile, bad);
}

int
main (int argc, char *argv[])
{
  FILE *j;
  int fd;
  struct w *ws = NULL;
  size_t n = 0, cap = 0, kept = 0, torn = 0;
  unsigned keep = argc > 4 ? atoi (argv[4]) : 50;
  const char *badfile = argc > 5 ? argv[5] : NULL;
  size_t *lost = NULL, nlost = 0; /* the writes dropped */
  struct pc_bad bad = { 0 };

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
  if (badfile && pc_bad_load (badfile, &bad) == -1)
    {
      perror (badfile);
      return 2;
    }
  for (;;)
    {
      struct powercut_rec rec;
      size_t got = fread (&rec, 1, sizeof rec, j);
      if (got == 0)
        break;
      /* A record the kill cut short was never applied to the image
       * (the journal is written first): it is simply not there.
       */
      if (got < sizeof rec || rec.magic != POWERCUT_MAGIC)
        break;
      char *old = malloc (rec.length), *new = malloc (rec.length);
      if (old == NULL || new == NULL)
        return 2;
      if (fread (old, 1, rec.length, j) != rec.length
          || fread (new, 1, rec.length, j) != rec.length)
        {
          /* Cut short in the journal: the plugin writes the journal
           * before the image, so the image never saw this write.
           */
          free (old);
          free (new);
          break;
        }
      if (n == cap)
        {
          cap = cap ? 2 * cap : 64;
          ws = realloc (ws, cap * sizeof *ws);
          if (ws == NULL)
            return 2;
        }
      ws[n++] = (struct w){ rec, old, new };
    }
  fclose (j);

  for (size_t i = n; i-- > 0;)
    if (pwrite (fd, ws[i].old, ws[i].rec.length, ws[i].rec.offset) < 0)
      return 2;
  lost = calloc (n + 1, sizeof *lost);
  if (lost == NULL)
    return 2;
  for (size_t i = 0; i < n; i++)
    {
      uint32_t len = ws[i].rec.length;
      if (!(ws[i].rec.flags & POWERCUT_DURABLE) && next () % 100 >= keep)
        {
          lost[nlost++] = i;
          continue;
        }
      kept++;
      if (!(ws[i].rec.flags & POWERCUT_DURABLE) && len > TEAR
          && next () % 8 == 0)
        {
          len = TEAR * (1 + next () % (len / TEAR));
          if (len > ws[i].rec.length)
            len = ws[i].rec.length;
          torn++;
        }
      if (pwrite (fd, ws[i].new, len, ws[i].rec.offset) < 0)
        return 2;
      pc_bad_heal (&bad, ws[i].rec.offset, len);
    }
  if (fsync (fd) == -1 || close (fd) == -1 || truncate (argv[2], 0) == -1)
    {
      perror ("powercut-apply");
      return 2;
    }
  printf ("powercut: %zu unflushed writes: %zu kept (%zu torn), %zu lost", n,
          kept, torn, n - kept);
  if (badfile && tear (badfile, &bad, ws, lost, nlost) == -1)
    {
      perror (badfile);
      return 2;
    }
  printf ("\n");
  for (size_t i = 0; i < n; i++)
    {
      free (ws[i].old);
      free (ws[i].new);
    }
  free (ws);
  free (lost);
  return 0;
}
