/* The crash campaigns' oracle (oracle.h: test-crashdev.c and the log's
 * campaign, test-log-crash.c): what a sector may hold after a crash.
 *
 * Per 512-byte sector (each carries its block, sector index and
 * version, see pattern_fill): the sector holds data written to that
 * very sector (or zeros from a zero or trim, or the initial version
 * 0), never anything else, and no older than what the last completed
 * FLUSH (or the sector's last FUA write) covered.  A trim not yet
 * covered by a completed FLUSH makes any version the sector ever had
 * legal (NBD: trimmed data is undefined); once covered, the sector
 * reads zeros (the memory backend zeroes trimmed ranges).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "membackend.h"
#include "oracle.h"

uint64_t
opnum (uint64_t v)
{
  return v & ~ZERO_FLAG;
}

void
model_init (struct model *m, uint64_t nsec, uint32_t spb)
{
  m->nsec = nsec;
  m->spb = spb;
  m->h = calloc (nsec, sizeof *m->h);
  m->latest = calloc (nsec, sizeof *m->latest);
  m->flushed = calloc (nsec, sizeof *m->flushed);
  m->trimmed = calloc (nsec, sizeof *m->trimmed);
  if (m->h == NULL || m->latest == NULL || m->flushed == NULL
      || m->trimmed == NULL)
    abort ();
}

void
model_free (struct model *m)
{
  for (uint64_t i = 0; i < m->nsec; i++)
    free (m->h[i].v);
  free (m->h);
  free (m->latest);
  free (m->flushed);
  free (m->trimmed);
}

void
model_set (struct model *m, uint64_t sec, uint64_t v)
{
  struct hist *h = &m->h[sec];

  if (h->n == h->cap)
    {
      h->cap = h->cap ? 2 * h->cap : 4;
      h->v = realloc (h->v, h->cap * sizeof *h->v);
      if (h->v == NULL)
        abort ();
    }
  h->v[h->n++] = v;
  m->latest[sec] = v;
}

void
model_flush_all (struct model *m)
{
  for (uint64_t i = 0; i < m->nsec; i++)
    {
      m->flushed[i] = opnum (m->latest[i]);
      m->trimmed[i] = false;
    }
}

/* Is this sector content acceptable for sector sec after a crash? */
bool
model_ok (const struct model *m, uint64_t sec, const unsigned char *data,
          char *why, size_t whylen)
{
  const struct hist *h = &m->h[sec];
  uint64_t lba = 0, ver = 0;
  uint32_t sidx = 0;
  int d = pattern_decode (data, &lba, &sidx, &ver);

  if (d < 0)
    {
      snprintf (why, whylen, "garbage");
      return false;
    }
  if (d == 1 && (lba != sec / m->spb || sidx != sec % m->spb))
    {
      snprintf (why, whylen, "block %llu sector %u's data (version %llu)",
                (unsigned long long)lba, sidx, (unsigned long long)ver);
      return false;
    }
  for (uint32_t i = 0; i < h->n; i++)
    {
      bool zero = h->v[i] & ZERO_FLAG;
      if ((d == 0) != zero || (!zero && h->v[i] != ver))
        continue;
      if (m->trimmed[sec] || opnum (h->v[i]) >= m->flushed[sec])
        return true;
    }
  if (d == 1)
    snprintf (why, whylen, "version %llu (%s; flushed: %llu, latest: %llu%s%s)",
              (unsigned long long)ver,
              h->n && ver <= opnum (m->latest[sec]) ? "older than allowed"
                                                    : "never written here",
              (unsigned long long)m->flushed[sec],
              (unsigned long long)opnum (m->latest[sec]),
              m->latest[sec] & ZERO_FLAG ? " zero" : "",
              m->trimmed[sec] ? ", trimmed" : "");
  else
    snprintf (why, whylen, "zeros (flushed: %llu, latest: %llu%s)",
              (unsigned long long)m->flushed[sec],
              (unsigned long long)opnum (m->latest[sec]),
              m->latest[sec] & ZERO_FLAG ? " zero" : "");
  return false;
}
