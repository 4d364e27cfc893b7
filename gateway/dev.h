/* Devices: where the cache (and later the log) lives.
 *
 * A device is a regular file or a block device opened by path, or an
 * NBD URI (dev-nbd.c); the unit tests add their own (a crash device
 * that keeps unsynced writes in memory: tests/unit/devcrash.h).  All
 * calls are thread-safe and return 0 or a positive errno.
 */
#ifndef HHC_DEV_H
#define HHC_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hhccore.h"

struct hhc_dev;

struct hhc_dev_ops {
  /* Read or write exactly len bytes at offset. */
  int (*pread) (struct hhc_dev *dev, void *buf, size_t len, uint64_t offset);
  int (*pwrite) (struct hhc_dev *dev, const void *buf, size_t len,
                 uint64_t offset);
  /* Make every completed write durable (fdatasync). */
  int (*sync) (struct hhc_dev *dev);
  /* Write exactly len bytes at offset, durable when it returns (FUA:
   * RWF_DSYNC on a file, NBD_CMD_FLAG_FUA).  NULL: the device offers
   * no FUA (write, then sync).
   */
  int (*pwrite_fua) (struct hhc_dev *dev, const void *buf, size_t len,
                     uint64_t offset);
  /* Release the device. */
  void (*close) (struct hhc_dev *dev);
};

struct hhc_dev {
  const struct hhc_dev_ops *ops;
  uint64_t size; /* bytes */
  char *name;    /* for messages */
  bool created;  /* a file this open created (removed again on failure) */
  /* Requests run one at a time (an NBD connection: libnbd serialises
   * a handle's calls): the log keeps one barrier in flight on it.
   */
  bool serial;
  /* A write-back error is reported to one fsync-type call (a sync, a
   * FUA write) of the open file only, not to every call that overlaps
   * it (Linux's errseq on a file or block device): the log then makes
   * such calls one at a time and a failure sticky (mirror_fsync).
   */
  bool errors_once;
};

/* Close a device after a failed start: a file that the open created is
 * removed (a refused start leaves nothing behind).
 */
void dev_discard (struct hhc_dev *d);

/* Open a regular file or block device, lock it (flock, so a second
 * gateway cannot open it: EBUSY) and find its size.  create_size > 0
 * creates a missing regular file of that size.  direct: O_DIRECT.
 */
int dev_open_file (const char *path, uint64_t create_size, bool direct,
                   hhc_msg_fn msgfn, struct hhc_dev **devp);

/* Open a regular file or block device read-only, to inspect it:
 * writes and syncs fail with EROFS.  It takes a shared flock if it can;
 * *busy: it cannot (a gateway has the device open; it is read anyway).
 */
int dev_open_file_readonly (const char *path, hhc_msg_fn msgfn,
                            struct hhc_dev **devp, bool *busy);
/* The same for a path or an NBD URI (dev-nbd.c; an NBD URI opens as
 * dev_open_nbd does, *busy false).
 */
int dev_open_readonly (const char *path, hhc_msg_fn msgfn,
                       struct hhc_dev **devp, bool *busy);

/* An NBD URI (nbd://, nbd+unix://, nbds://...) through libnbd. */
int dev_open_nbd (const char *uri, hhc_msg_fn msgfn, struct hhc_dev **devp);
/* The same, giving up the connection after timeout_ms (-1: never). */
int dev_open_nbd_bounded (const char *uri, int timeout_ms, hhc_msg_fn msgfn,
                          struct hhc_dev **devp);
bool dev_is_nbd_uri (const char *path);
/* A path or an NBD URI (create_size and direct apply to files). */
int dev_open_path (const char *path, uint64_t create_size, bool direct,
                   hhc_msg_fn msgfn, struct hhc_dev **devp);

static inline int
dev_pread (struct hhc_dev *d, void *buf, size_t len, uint64_t off)
{
  return d->ops->pread (d, buf, len, off);
}

static inline int
dev_pwrite (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return d->ops->pwrite (d, buf, len, off);
}

/* Does the device offer FUA writes (dev_pwrite_fua)? */
static inline bool
dev_can_fua (const struct hhc_dev *d)
{
  return d->ops->pwrite_fua != NULL;
}

/* A write that is durable when it returns (dev_can_fua only). */
static inline int
dev_pwrite_fua (struct hhc_dev *d, const void *buf, size_t len, uint64_t off)
{
  return d->ops->pwrite_fua (d, buf, len, off);
}

static inline int
dev_sync (struct hhc_dev *d)
{
  return d->ops->sync (d);
}

static inline void
dev_close (struct hhc_dev *d)
{
  if (d)
    d->ops->close (d);
}

#endif /* HHC_DEV_H */
