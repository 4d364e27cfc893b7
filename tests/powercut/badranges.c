/* Unreadable ranges of a powercut disk (see powercut.h): the plugin's
 * bad= file and powercut-apply's BAD-FILE, one "OFFSET LENGTH" line a
 * range.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "powercut.h"

int
pc_bad_load (const char *file, struct pc_bad *b)
{
  FILE *f = fopen (file, "r");
  uint64_t off, len;

  memset (b, 0, sizeof *b);
  if (f == NULL)
    return errno == ENOENT ? 0 : -1; /* missing: none */
  while (fscanf (f, "%" SCNu64 " %" SCNu64, &off, &len) == 2)
    if (pc_bad_add (b, off, len) == -1)
      {
        fclose (f);
        errno = EFBIG;
        return -1;
      }
  return fclose (f) == EOF ? -1 : 0;
}

/* Through a new file renamed over the old one: a kill while it is
 * written leaves the old one whole.
 */
int
pc_bad_save (const char *file, const struct pc_bad *b)
{
  char tmp[4096];
  FILE *f;

  if (snprintf (tmp, sizeof tmp, "%s.new", file) >= (int)sizeof tmp)
    {
      errno = ENAMETOOLONG;
      return -1;
    }
  f = fopen (tmp, "w");
  if (f == NULL)
    return -1;
  for (unsigned i = 0; i < b->n; i++)
    if (fprintf (f, "%" PRIu64 " %" PRIu64 "\n", b->off[i], b->len[i]) < 0)
      {
        fclose (f);
        return -1;
      }
  if (fclose (f) == EOF)
    return -1;
  return rename (tmp, file);
}

bool
pc_bad_hits (const struct pc_bad *b, uint64_t off, uint64_t len)
{
  for (unsigned i = 0; i < b->n; i++)
    if (off < b->off[i] + b->len[i] && b->off[i] < off + len)
      return true;
  return false;
}

/* A write over [off, off + len) makes what it covers readable (a disk
 * remaps a sector it writes); each range keeps its larger rest.
 */
void
pc_bad_heal (struct pc_bad *b, uint64_t off, uint64_t len)
{
  unsigned k = 0;
  uint64_t end = off + len;

  for (unsigned i = 0; i < b->n; i++)
    {
      uint64_t b0 = b->off[i], b1 = b0 + b->len[i];
      if (off < b1 && end > b0)
        {
          if (off > b0 && off - b0 >= b1 - (end < b1 ? end : b1))
            b1 = off; /* the part before the write is the larger */
          else
            b0 = end < b1 ? end : b1;
        }
      if (b1 > b0)
        {
          b->off[k] = b0;
          b->len[k++] = b1 - b0;
        }
    }
  b->n = k;
}

/* One more range; -1 when PC_BAD_MAX are there (a harness limit:
 * never drop one, which would read again).
 */
int
pc_bad_add (struct pc_bad *b, uint64_t off, uint64_t len)
{
  if (len == 0)
    return 0;
  if (b->n == PC_BAD_MAX)
    return -1;
  b->off[b->n] = off;
  b->len[b->n++] = len;
  return 0;
}
