/* NBD devices (libnbd): a log mirror on another host, or an emulated
 * HDD behind nbdkit's delay/rate filters in benchmarks.
 *
 * One libnbd handle is shared by every thread (libnbd serialises calls
 * on a handle).  Requests are split at 16 MiB, below every server's
 * limit.  The server should give the export to one client only: NBD has
 * no lock, so two gateways on one export are the operator's mistake.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "dev.h"

#ifdef HAVE_LIBNBD
#include <libnbd.h>

#define NBD_CHUNK (16 * 1024 * 1024)

struct nbd_dev {
  struct hhc_dev dev;
  struct nbd_handle *nbd;
  bool can_flush; /* as negotiated at open */
};

static int
nbd_errno (void)
{
  int e = nbd_get_errno ();
  return e ? e : EIO;
}

static int
nbd_dev_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  struct nbd_dev *n = (struct nbd_dev *)d;
  char *p = buf;

  while (len > 0)
    {
      size_t k = HHC_MIN (len, (size_t)NBD_CHUNK);
      if (nbd_pread (n->nbd, p, k, off, 0) == -1)
        return nbd_errno ();
      p += k;
      off += k;
      len -= k;
    }
  return 0;
}

static int
nbd_dev_write (struct hhc_dev *d, const void *buf, size_t len, uint64_t off,
               uint32_t flags)
{
  struct nbd_dev *n = (struct nbd_dev *)d;
  const char *p = buf;

  while (len > 0)
    {
      size_t k = HHC_MIN (len, (size_t)NBD_CHUNK);
      if (nbd_pwrite (n->nbd, p, k, off, flags) == -1)
        return nbd_errno ();
      p += k;
      off += k;
      len -= k;
    }
  return 0;
}

static int
nbd_dev_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return nbd_dev_write (d, buf, len, off, 0);
}

/* Only on a connection whose server advertised FUA (nbd_fua_ops). */
static int
nbd_dev_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len,
                    uint64_t off)
{
  return nbd_dev_write (d, buf, len, off, LIBNBD_CMD_FLAG_FUA);
}

static int
nbd_dev_sync (struct hhc_dev *d)
{
  struct nbd_dev *n = (struct nbd_dev *)d;

  /* What the server said at open, not nbd_can_flush now: on a handle
   * whose connection died that fails (-1, EINVAL), and taking the
   * failure for "no flush needed" made a sync succeed after the server
   * was gone, so a FLUSH returned with its data lost (the power-cut
   * campaign's unexplained losses, docs/open-failures.md).
   */
  if (!n->can_flush)
    return 0; /* the server says writes are durable when done */
  return nbd_flush (n->nbd, 0) == -1 ? nbd_errno () : 0;
}

static void
nbd_dev_close (struct hhc_dev *d)
{
  struct nbd_dev *n = (struct nbd_dev *)d;

  nbd_shutdown (n->nbd, 0);
  nbd_close (n->nbd);
  free (d->name);
  free (n);
}

static const struct hhc_dev_ops nbd_ops = {
  .pread = nbd_dev_pread,
  .pwrite = nbd_dev_pwrite,
  .sync = nbd_dev_sync,
  .close = nbd_dev_close,
};

/* The same, for a server that advertised FUA at open. */
static const struct hhc_dev_ops nbd_fua_ops = {
  .pread = nbd_dev_pread,
  .pwrite = nbd_dev_pwrite,
  .sync = nbd_dev_sync,
  .close = nbd_dev_close,
  .pwrite_fua = nbd_dev_pwrite_fua,
};

/* Connect h to uri, giving up after timeout_ms (-1: never).  A TCP
 * connect to a host that is gone otherwise waits for the kernel's SYN
 * retries, minutes.
 */
static int
connect_bounded (struct nbd_handle *h, const char *uri, int timeout_ms)
{
  uint64_t end = hhc_now_ns () + (uint64_t)timeout_ms * 1000000;

  if (timeout_ms < 0)
    return nbd_connect_uri (h, uri);
  if (nbd_aio_connect_uri (h, uri) == -1)
    return -1;
  while (nbd_aio_is_connecting (h))
    {
      uint64_t now = hhc_now_ns ();
      if (now >= end)
        {
          nbd_shutdown (h, 0);
          return -1;
        }
      if (nbd_poll (h, (int)((end - now + 999999) / 1000000)) == -1)
        return -1;
    }
  return nbd_aio_is_ready (h) ? 0 : -1;
}

int
dev_open_nbd_bounded (const char *uri, int timeout_ms, hhc_msg_fn msgfn,
                      struct hhc_dev **devp)
{
  struct nbd_dev *n = calloc (1, sizeof *n);
  int64_t size;

  if (n == NULL || (n->dev.name = strdup (uri)) == NULL)
    {
      free (n);
      return ENOMEM;
    }
  n->dev.ops = &nbd_ops;
  n->nbd = nbd_create ();
  if (n->nbd == NULL || connect_bounded (n->nbd, uri, timeout_ms) == -1
      || (size = nbd_get_size (n->nbd)) == -1)
    {
      int e = nbd_errno () ? nbd_errno () : ETIMEDOUT;
      const char *msg = nbd_get_error ();
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: %s", uri,
               msg ? msg : "connection timed out");
      if (n->nbd)
        nbd_close (n->nbd);
      free (n->dev.name);
      free (n);
      return e;
    }
  if (nbd_is_read_only (n->nbd) == 1)
    {
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: the export is read-only", uri);
      nbd_dev_close (&n->dev);
      return EROFS;
    }
  int cf = nbd_can_flush (n->nbd);
  if (cf == -1)
    {
      int e = nbd_errno ();
      hhc_msg (msgfn, HHC_MSG_ERROR, "%s: %s", uri, nbd_get_error ());
      nbd_dev_close (&n->dev);
      return e;
    }
  n->can_flush = cf == 1;
  n->dev.serial = true;
  /* What the server said at open, as for flush (nbd_dev_sync). */
  if (nbd_can_fua (n->nbd) == 1)
    n->dev.ops = &nbd_fua_ops;
  n->dev.size = size;
  *devp = &n->dev;
  return 0;
}

int
dev_open_nbd (const char *uri, hhc_msg_fn msgfn, struct hhc_dev **devp)
{
  return dev_open_nbd_bounded (uri, -1, msgfn, devp);
}

#else /* !HAVE_LIBNBD */

int
dev_open_nbd_bounded (const char *uri, int timeout_ms, hhc_msg_fn msgfn,
                      struct hhc_dev **devp)
{
  (void)devp;
  (void)timeout_ms;
  hhc_msg (msgfn, HHC_MSG_ERROR,
           "%s: NBD devices need libnbd, which this build does not have", uri);
  return ENOTSUP;
}

int
dev_open_nbd (const char *uri, hhc_msg_fn msgfn, struct hhc_dev **devp)
{
  return dev_open_nbd_bounded (uri, -1, msgfn, devp);
}

#endif

void
dev_discard (struct hhc_dev *d)
{
  if (d == NULL)
    return;
  if (d->created)
    unlink (d->name);
  dev_close (d);
}

bool
dev_is_nbd_uri (const char *path)
{
  return strncmp (path, "nbd://", 6) == 0 || strncmp (path, "nbds://", 7) == 0
         || strncmp (path, "nbd+unix://", 11) == 0
         || strncmp (path, "nbds+unix://", 12) == 0
         || strncmp (path, "nbd+vsock://", 12) == 0;
}

bool
hhc_is_nbd_uri (const char *path)
{
  return dev_is_nbd_uri (path);
}

int
dev_open_path (const char *path, uint64_t create_size, bool direct,
               hhc_msg_fn msgfn, struct hhc_dev **devp)
{
  if (dev_is_nbd_uri (path))
    return dev_open_nbd (path, msgfn, devp);
  return dev_open_file (path, create_size, direct, msgfn, devp);
}

int
dev_open_readonly (const char *path, hhc_msg_fn msgfn, struct hhc_dev **devp,
                   bool *busy)
{
  *busy = false;
  if (dev_is_nbd_uri (path))
    return dev_open_nbd (path, msgfn, devp);
  return dev_open_file_readonly (path, msgfn, devp, busy);
}
