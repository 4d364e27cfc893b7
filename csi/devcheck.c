/* hhc-csi: checks on a staged volume's device before anything
 * irreversible is done to it (node.h "devcheck.c"): that no mount is
 * left on it before it is detached, and that it reads, and reads as
 * zeros, before a file system is made on it.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "node.h"

int
dev_mounted_elsewhere (const char *dev, struct csi_err *e)
{
  HHC_CLEANUP_FREE char *line = NULL;
  char want[32], where[512] = "";
  size_t cap = 0;
  struct stat st;
  FILE *f;

  if (dev[0] == '\0' || stat (dev, &st) < 0 || !S_ISBLK (st.st_mode))
    return 0; /* gone: nothing can be mounted from it */
  snprintf (want, sizeof want, "%u:%u", major (st.st_rdev), minor (st.st_rdev));
  if ((f = fopen ("/proc/self/mountinfo", "re")) == NULL)
    return csi_fail (e, CSI_INTERNAL, "/proc/self/mountinfo: %s",
                     strerror (errno));
  while (where[0] == '\0' && getline (&line, &cap, f) != -1)
    {
      char id[32], mm[32], root[8];
      if (sscanf (line, "%31s %*s %31s %7s %511s", id, mm, root, where) == 4
          && strcmp (mm, want) != 0)
        where[0] = '\0';
    }
  fclose (f);
  if (where[0])
    return csi_fail (e, CSI_FAILED_PRECONDITION,
                     "%s is still mounted at %s (unpublish it first)", dev,
                     where);
  return 0;
}

#define PROBE (1024 * 1024)

/* Read len bytes at off with O_DIRECT into buf: 1 all zeros, 0 not,
 * -1 with errno.
 */
static int
zeros_at (int fd, char *buf, size_t len, off_t off)
{
  for (size_t done = 0; done < len;)
    {
      ssize_t n = pread (fd, buf + done, len - done, off + done);
      if (n < 0)
        return -1;
      if (n == 0)
        break;
      done += n;
    }
  for (size_t i = 0; i < len; i++)
    if (buf[i])
      return 0;
  return 1;
}

int
dev_reads_blank (const char *dev, struct csi_err *e)
{
  off_t size;
  void *buf = NULL;
  int fd, r = -1;

  fd = open (dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    return csi_fail (e, CSI_UNAVAILABLE, "%s: %s", dev, strerror (errno));
  size = lseek (fd, 0, SEEK_END);
  if (size > 0 && posix_memalign (&buf, 4096, PROBE) == 0)
    {
      size_t len = size < PROBE ? (size_t)size & ~(size_t)4095 : PROBE;
      r = zeros_at (fd, buf, len, 0);
      if (r == 1 && size > 2 * PROBE)
        r = zeros_at (fd, buf, len, (size - PROBE) & ~(off_t)4095);
    }
  if (r < 0)
    csi_fail (e, CSI_UNAVAILABLE,
              "reading %s: %s: not making a file system on a device that "
              "cannot be read",
              dev, size <= 0 ? "no size" : strerror (errno));
  free (buf);
  close (fd);
  return r;
}
