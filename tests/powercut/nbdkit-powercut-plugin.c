/* nbdkit-powercut-plugin: IMAGE served with a journal of the writes a
 * power cut may lose (see powercut.h).  For the power-cut campaign
 * only: requests are serialised, and every write costs a read and two
 * writes.
 *
 *   nbdkit powercut.so file=IMAGE journal=JOURNAL [lie=true] [bad=FILE]
 *                      [fua=false] [flush-ms=MS]
 *
 * lie=true makes FLUSH a no-op that keeps the journal: a disk that
 * acknowledges flushes it does not do, for checking that the campaign
 * notices lost data.
 *
 * bad=FILE: lines of "OFFSET LENGTH" (powercut-apply's BAD-FILE), bytes
 * that torn writes left unreadable: a read that touches them fails
 * with EIO until a write covers them.  What a write covers reads again
 * at once; FILE (the medium) says so once the write is durable (a
 * FLUSH, a FUA write: FILE is rewritten then, since the server is
 * killed, not stopped; powercut-apply heals it by the writes a cut
 * keeps).  A missing or empty FILE: none.
 *
 * fua=false: the disk offers no FUA (clients write, then flush: what
 * they wrote before a flush may be lost or torn).
 *
 * flush-ms=MS: a FLUSH takes MS ms before it makes the writes durable
 * (an HDD's cache flush takes a rotation or more), so that a cut falls
 * between a write and its flush as often as on such a disk.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "powercut.h"

static char *file, *journal, *badfile;
static int fd = -1, jfd = -1;
static int lie;
static int fua = 1;
static unsigned flush_ms;
static struct pc_bad seen;  /* unreadable, as reads see it */
static struct pc_bad media; /* and on the medium (bad=) */

static int
pc_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0)
    file = nbdkit_realpath (value);
  else if (strcmp (key, "lie") == 0)
    {
      lie = nbdkit_parse_bool (value);
      return lie == -1 ? -1 : 0;
    }
  else if (strcmp (key, "fua") == 0)
    {
      fua = nbdkit_parse_bool (value);
      return fua == -1 ? -1 : 0;
    }
  else if (strcmp (key, "flush-ms") == 0)
    {
      if (nbdkit_parse_unsigned ("flush-ms", value, &flush_ms) == -1)
        return -1;
    }
  else if (strcmp (key, "journal") == 0)
    {
      free (journal);
      journal = strdup (value);
    }
  else if (strcmp (key, "bad") == 0)
    {
      free (badfile);
      badfile = strdup (value);
    }
  else
    {
      nbdkit_error ("powercut: unknown parameter '%s'", key);
      return -1;
    }
  return 0;
}

static int
pc_get_ready (void)
{
  if (file == NULL || journal == NULL)
    {
      nbdkit_error ("powercut: file= and journal= are required");
      return -1;
    }
  fd = open (file, O_RDWR);
  jfd = open (journal, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd == -1 || jfd == -1)
    {
      nbdkit_error ("powercut: %s or %s: %m", file, journal);
      return -1;
    }
  if (badfile && pc_bad_load (badfile, &media) == -1)
    {
      nbdkit_error ("powercut: %s: %m (at most %d ranges)", badfile,
                    PC_BAD_MAX);
      return -1;
    }
  seen = media;
  return 0;
}

/* Save the medium's unreadable bytes in bad=. */
static int
save_media (void)
{
  if (pc_bad_save (badfile, &media) == -1)
    {
      nbdkit_error ("powercut: %s: %m", badfile);
      return -1;
    }
  return 0;
}

static bool
bad_same (const struct pc_bad *a, const struct pc_bad *b)
{
  if (a->n != b->n)
    return false;
  for (unsigned i = 0; i < a->n; i++)
    if (a->off[i] != b->off[i] || a->len[i] != b->len[i])
      return false;
  return true;
}

/* Every write is durable: what reads see is the medium's. */
static int
settle (void)
{
  if (badfile == NULL || bad_same (&media, &seen))
    return 0;
  media = seen;
  return save_media ();
}

/* A FUA write over [offset, +count) is durable: it heals the medium. */
static int
settle_fua (uint32_t count, uint64_t offset)
{
  struct pc_bad was = media;

  if (badfile == NULL)
    return 0;
  pc_bad_heal (&media, offset, count);
  return bad_same (&was, &media) ? 0 : save_media ();
}

static void
pc_unload (void)
{
  /* A clean stop: the next start keeps every write (the journal is
   * emptied then), so the heals are the medium's too.
   */
  if (!lie)
    settle ();
  free (file);
  free (journal);
  free (badfile);
  if (fd >= 0)
    close (fd);
  if (jfd >= 0)
    close (jfd);
}

static void *
pc_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
pc_get_size (void *h)
{
  struct stat st;

  if (fstat (fd, &st) == -1)
    {
      nbdkit_error ("powercut: fstat: %m");
      return -1;
    }
  return st.st_size;
}

static int
pc_can_fua (void *h)
{
  return fua ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_NONE;
}

static int
pc_can_flush (void *h)
{
  return 1;
}

static int
pc_pread (void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (pc_bad_hits (&seen, offset, count))
    {
      nbdkit_error ("powercut: read at %llu: unreadable sectors (bad=)",
                    (unsigned long long)offset);
      errno = EIO;
      return -1;
    }
  if (pread (fd, buf, count, offset) != (ssize_t)count)
    {
      nbdkit_error ("powercut: pread: %m");
      errno = EIO;
      return -1;
    }
  return 0;
}

static int
all (int f, const void *buf, size_t n)
{
  const char *p = buf;

  while (n > 0)
    {
      ssize_t r = write (f, p, n);
      if (r <= 0)
        return -1;
      p += r;
      n -= r;
    }
  return 0;
}

/* Journal the write of BUF (NULL: zeros), then do it. */
static int
journalled_write (const void *buf, uint32_t count, uint64_t offset,
                  uint32_t flags)
{
  struct powercut_rec rec
      = { .magic = POWERCUT_MAGIC,
          .offset = offset,
          .length = count,
          .flags = (flags & NBDKIT_FLAG_FUA) ? POWERCUT_DURABLE : 0 };
  char *old = malloc (count), *zeros = NULL;
  int r = -1;

  if (buf == NULL)
    buf = zeros = calloc (1, count);
  if (old == NULL || buf == NULL)
    {
      nbdkit_error ("powercut: out of memory");
      goto out;
    }
  if (pread (fd, old, count, offset) != (ssize_t)count
      || all (jfd, &rec, sizeof rec) == -1 || all (jfd, old, count) == -1
      || all (jfd, buf, count) == -1
      || pwrite (fd, buf, count, offset) != (ssize_t)count)
    {
      nbdkit_error ("powercut: write at %llu: %m", (unsigned long long)offset);
      goto out;
    }
  pc_bad_heal (&seen, offset, count);
  r = (flags & NBDKIT_FLAG_FUA) ? settle_fua (count, offset) : 0;
out:
  free (old);
  free (zeros);
  if (r == -1)
    errno = EIO;
  return r;
}

static int
pc_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  return journalled_write (buf, count, offset, flags);
}

static int
pc_zero (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  return journalled_write (NULL, count, offset, flags);
}

static int
pc_flush (void *h, uint32_t flags)
{
  if (flush_ms)
    {
      struct timespec ts
          = { flush_ms / 1000, (long)(flush_ms % 1000) * 1000000 };
      nanosleep (&ts, NULL);
    }
  /* Everything written so far is durable: nothing for a cut to lose.
   * The marker first (a kill after it: powercut-apply keeps every
   * earlier write), then the medium's unreadable bytes, then the
   * journal emptied.
   */
  struct powercut_rec mark
      = { .magic = POWERCUT_MAGIC, .flags = POWERCUT_FLUSH };
  if (lie)
    return 0;
  if (all (jfd, &mark, sizeof mark) == -1 || settle () == -1
      || ftruncate (jfd, 0) == -1)
    {
      nbdkit_error ("powercut: flush: %m");
      errno = EIO;
      return -1;
    }
  return 0;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

static struct nbdkit_plugin plugin = {
  .name = "powercut",
  .version = PACKAGE_VERSION,
  .config = pc_config,
  .get_ready = pc_get_ready,
  .unload = pc_unload,
  .open = pc_open,
  .get_size = pc_get_size,
  .can_fua = pc_can_fua,
  .can_flush = pc_can_flush,
  .pread = pc_pread,
  .pwrite = pc_pwrite,
  .zero = pc_zero,
  .flush = pc_flush,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
