/* File and block devices.
 *
 * The file descriptor is opened once and shared by every thread
 * (pread/pwrite are thread-safe).  flock(LOCK_EX|LOCK_NB) on the
 * descriptor keeps a second gateway off the device; the lock lives as
 * long as the open file description, also across nbdkit's fork.
 *
 * dev_open_file_readonly opens O_RDONLY with a shared flock (hhcctl check
 * reads a device while a gateway may hold it): writes and syncs fail
 * with EROFS.
 *
 * With O_DIRECT, buffers, offsets and lengths must be aligned; a
 * request that is not is bounced through an aligned buffer.
 */
#include <config.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"
#include "dev.h"

#define DIRECT_ALIGN 4096

struct file_dev {
  struct hhc_dev dev;
  int fd;
  bool direct;
};

static bool
aligned (const void *buf, size_t len, uint64_t off)
{
  return ((uintptr_t)buf | len | off) % DIRECT_ALIGN == 0;
}

static int
full_pread (int fd, void *buf, size_t len, uint64_t off)
{
  char *p = buf;

  while (len > 0)
    {
      ssize_t r = pread (fd, p, len, off);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return errno;
        }
      if (r == 0) /* past the end: reads as zeros */
        {
          memset (p, 0, len);
          return 0;
        }
      p += r;
      len -= r;
      off += r;
    }
  return 0;
}

/* pwrite of it all; fua: each write durable when it returns
 * (RWF_DSYNC, the FUA of a file).
 */
static int
full_pwrite (int fd, const void *buf, size_t len, uint64_t off, bool fua)
{
  const char *p = buf;

  while (len > 0)
    {
      struct iovec iov = { (void *)p, len };
      ssize_t r = fua ? pwritev2 (fd, &iov, 1, off, RWF_DSYNC)
                      : pwrite (fd, p, len, off);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return errno;
        }
      p += r;
      len -= r;
      off += r;
    }
  return 0;
}

/* Bounce an unaligned O_DIRECT request: read-modify-write of the
 * aligned span around it.
 */
static int
bounce (struct file_dev *f, void *rbuf, const void *wbuf, size_t len,
        uint64_t off, bool fua)
{
  uint64_t start = off / DIRECT_ALIGN * DIRECT_ALIGN;
  uint64_t end = HHC_ROUND_UP (off + len, DIRECT_ALIGN);
  HHC_CLEANUP_FREE char *b = hhc_alloc_aligned (end - start);
  int r;

  if (b == NULL)
    return ENOMEM;
  r = full_pread (f->fd, b, end - start, start);
  if (r)
    return r;
  if (rbuf)
    {
      memcpy (rbuf, b + (off - start), len);
      return 0;
    }
  memcpy (b + (off - start), wbuf, len);
  return full_pwrite (f->fd, b, end - start, start, fua);
}

static int
file_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct file_dev *f = (struct file_dev *)d;

  if (off + len > d->size)
    return EIO;
  if (f->direct && !aligned (buf, len, off))
    return bounce (f, buf, NULL, len, off, false);
  return full_pread (f->fd, buf, len, off);
}

static int
file_write (struct hhc_dev *d, const void *buf, size_t len, uint64_t off,
            bool fua)
{
  struct file_dev *f = (struct file_dev *)d;

  if (off + len > d->size)
    return EIO;
  int r = f->direct && !aligned (buf, len, off)
              ? bounce (f, NULL, buf, len, off, fua)
              : full_pwrite (f->fd, buf, len, off, fua);
  if (fua && (r == EOPNOTSUPP || r == ENOSYS))
    {
      /* A kernel without RWF_DSYNC (before 4.7): write, then sync. */
      r = file_write (d, buf, len, off, false);
      if (r == 0 && fdatasync (f->fd) == -1)
        r = errno;
    }
  return r;
}

static int
file_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return file_write (d, buf, len, off, false);
}

/* RWF_DSYNC: the data, and what is needed to read it back, durable
 * when pwritev2 returns (or a write and fdatasync: file_write).
 */
static int
file_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return file_write (d, buf, len, off, true);
}

static int
file_sync (struct hhc_dev *d)
{
  struct file_dev *f = (struct file_dev *)d;

  if (fdatasync (f->fd) == -1)
    return errno;
  return 0;
}

static void
file_close (struct hhc_dev *d)
{
  struct file_dev *f = (struct file_dev *)d;

  close (f->fd); /* releases the flock */
  free (d->name);
  free (f);
}

static const struct hhc_dev_ops file_ops = {
  .pread = file_pread,
  .pwrite = file_pwrite,
  .sync = file_sync,
  .close = file_close,
  .pwrite_fua = file_pwrite_fua,
};

/* Read-only (dev_open_file_readonly): nothing can change a byte. */
static int
ro_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return EROFS;
}

static int
ro_sync (struct hhc_dev *d)
{
  return EROFS;
}

static const struct hhc_dev_ops file_ro_ops = {
  .pread = file_pread,
  .pwrite = ro_pwrite,
  .sync = ro_sync,
  .close = file_close,
};

/* Size of a regular file or block device. */
static int
fd_size (int fd, uint64_t *size)
{
  struct stat st;

  if (fstat (fd, &st) == -1)
    return errno;
  if (S_ISBLK (st.st_mode))
    {
      if (ioctl (fd, BLKGETSIZE64, size) == -1)
        return errno;
      return 0;
    }
  if (!S_ISREG (st.st_mode))
    return ENODEV;
  *size = st.st_size;
  return 0;
}

/* Open (creating a missing file when create_size > 0). */
static int
open_path (const char *path, uint64_t create_size, bool direct,
           hhc_msg_fn msgfn, int *fdp, bool *created)
{
  int flags = O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0);
  int fd = open (path, flags);

  if (fd == -1 && errno == ENOENT && create_size > 0)
    {
      fd = open (path, flags | O_CREAT | O_EXCL, 0600);
      *created = fd >= 0;
      if (fd >= 0 && ftruncate (fd, create_size) == -1)
        {
          int e = errno;
          hhc_msg (msgfn, HHC_MSG_ERROR, "%s: cannot set size: %s", path,
                   strerror (e));
          close (fd);
          unlink (path);
          return e;
        }
    }
  if (fd == -1)
    {
      int e = errno;
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: %s", path, strerror (e));
      return e;
    }
  *fdp = fd;
  return 0;
}

/* The device on an open fd (closed on failure). */
static int
new_file_dev (const char *path, int fd, uint64_t size, bool direct,
              const struct hhc_dev_ops *ops, struct hhc_dev **devp)
{
  struct file_dev *f = calloc (1, sizeof *f);

  if (f == NULL || (f->dev.name = strdup (path)) == NULL)
    {
      free (f);
      close (fd);
      return ENOMEM;
    }
  f->dev.ops = ops;
  f->dev.size = size;
  f->dev.errors_once = true; /* a file's write-back errors: errseq */
  f->fd = fd;
  f->direct = direct;
  *devp = &f->dev;
  return 0;
}

int
dev_open_file (const char *path, uint64_t create_size, bool direct,
               hhc_msg_fn msgfn, struct hhc_dev **devp)
{
  uint64_t size;
  bool created = false;
  int fd = -1, r;

  r = open_path (path, create_size, direct, msgfn, &fd, &created);
  if (r)
    return r;
  if (flock (fd, LOCK_EX | LOCK_NB) == -1)
    {
      r = errno == EWOULDBLOCK ? EBUSY : errno;
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "%s: device is locked: in use by another gateway", path);
      close (fd);
      return r;
    }
  r = fd_size (fd, &size);
  if (r)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: not a regular file or block device",
               path);
      close (fd);
      return r;
    }
  if (create_size > 0 && size < create_size)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR,
               "%s: file is %" PRIu64 " bytes, smaller than the %" PRIu64
               " bytes given for it (cache-size= or log-size=)",
               path, size, create_size);
      close (fd);
      return EINVAL;
    }
  r = new_file_dev (path, fd, size, direct, &file_ops, devp);
  if (r == 0)
    (*devp)->created = created;
  return r;
}

int
dev_open_file_readonly (const char *path, hhc_msg_fn msgfn,
                        struct hhc_dev **devp, bool *busy)
{
  uint64_t size;
  int fd, r;

  *busy = false;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    {
      r = errno;
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: %s", path, strerror (r));
      return r;
    }
  r = fd_size (fd, &size);
  if (r)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: not a regular file or block device",
               path);
      close (fd);
      return r;
    }
  /* A running gateway holds an exclusive lock: then a shared one
   * cannot be had (the device is read anyway).
   */
  if (flock (fd, LOCK_SH | LOCK_NB) == -1)
    *busy = true;
  return new_file_dev (path, fd, size, false, &file_ro_ops, devp);
}
