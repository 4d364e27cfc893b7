/* hhc-csi's node side, inside the core: the helpers node.c uses.
 *
 *   run.c     run a helper program: argv (never a shell), stdin from a
 *             buffer, stdout and stderr captured (bounded), a timeout
 *   mount.c   mountinfo, mkfs when blank, mount, bind mounts, unmount
 *   attach.c  a block device for an export on the node's gateway
 *
 * None of these logs a mount flag or a secret: messages name programs
 * and paths only.
 */
#ifndef HHC_CSI_NODE_H
#define HHC_CSI_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "csi.h"

/* ---- run.c ---- */

#define RUN_OUT_MAX 4096
struct run_res {
  int status;            /* exit status; -1: killed by a signal */
  bool timed_out;        /* killed after the timeout */
  char out[RUN_OUT_MAX]; /* stdout, NUL-terminated, cut at the bound */
  char err[RUN_OUT_MAX]; /* stderr, likewise */
};

/* Run argv[0] (PATH searched) with argv, stdin from in (len bytes; NULL:
 * /dev/null), at most timeout_s seconds (then SIGKILL by PID).  0 when
 * it ran (r->status tells how it ended: 127 when it could not be
 * executed), -1 with errno when it could not be started.
 */
int run_prog (const char *const *argv, const char *in, size_t len,
              unsigned timeout_s, struct run_res *r);

/* The first line of r->err (or r->out when stderr is empty), for a
 * one-line message; "exit status N" when both are empty.
 */
const char *run_line (struct run_res *r);

/* Start argv in the background, in a session of its own, stdin from
 * /dev/null and stdout and stderr to logfile (appended).  The PID, or
 * -1 with errno.  run_ended reaps it.
 */
pid_t run_spawn (const char *const *argv, const char *logfile);

/* Whether process pid has ended (reaped when it is our child). */
bool run_ended (pid_t pid);

/* ---- mount.c ---- */

/* ---- devcheck.c ---- */

/* FAILED_PRECONDITION naming the mount point when a mount of the block
 * device dev is left (a publish not unpublished); 0 when none is.
 */
int dev_mounted_elsewhere (const char *dev, struct csi_err *e);
/* Whether the device's first and last MiB read as zeros (O_DIRECT):
 * 1 yes, 0 no (it holds data), -1 UNAVAILABLE when a read fails.
 */
int dev_reads_blank (const char *dev, struct csi_err *e);

/* Whether path is a mount point (/proc/self/mountinfo). -1 on error. */
int mnt_is_mounted (const char *path);
/* 1 when dev holds a file system (blkid -p), 0 when blank, -1 with
 * *e set when blkid fails otherwise.
 */
int mnt_has_fs (const char *dev, struct csi_err *e);
/* Whether fs_type is one mkfs accepts ("ext4", "xfs"). */
bool mnt_fs_supported (const char *fs_type);
/* Make fs_type on dev without discarding it. */
int mnt_mkfs (const char *dev, const char *fs_type, struct csi_err *e);
/* CSI mount flags parsed: generic options as MS_* flags, the others
 * (file-system options, possibly secret: never logged) comma-joined.
 */
struct mnt_opts {
  unsigned long flags; /* MS_* set by the generic options */
  unsigned long named; /* MS_* a generic option set or cleared */
  char *data;          /* the rest for mount(2), malloc'd; NULL for none */
};
/* Parse flags into *o (mnt_opts_free it); INVALID_ARGUMENT for an
 * empty flag or one the driver refuses (remount, bind...).
 */
int mnt_opts_parse (const char *const *flags, size_t nflags, struct mnt_opts *o,
                    struct csi_err *e);
/* Wipe and free o's data. */
void mnt_opts_free (struct mnt_opts *o);
/* mnt_opts_parse's verdict alone (before anything changes). */
int mnt_flags_check (const char *const *flags, size_t nflags,
                     struct csi_err *e);
/* Mount dev (fs_type) on path with flags by mount(2) (never logged);
 * the kernel's EINVAL with file-system options is INVALID_ARGUMENT.
 */
int mnt_mount (const char *dev, const char *path, const char *fs_type,
               const char *const *flags, size_t nflags, bool readonly,
               struct csi_err *e);
/* Bind-mount src on target, then remount it with the generic options
 * of flags (nosuid, nodev, noexec, atime modes; ro when readonly);
 * file-system options are checked but left to the staging mount.
 */
int mnt_bind (const char *src, const char *target, const char *const *flags,
              size_t nflags, bool readonly, struct csi_err *e);
/* Unmount path; success when it is not mounted. */
int mnt_umount (const char *path, struct csi_err *e);

/* ---- attach.c ---- */

enum attach_kind { ATTACH_NONE, ATTACH_NBD, ATTACH_LOOP };

struct attach {
  enum attach_kind kind;
  char dev[64];        /* /dev/nbdN or /dev/loopN */
  char fuse_dir[4096]; /* nbdfuse: its mount point, the file is disk */
  pid_t fuse_pid;      /* nbdfuse's PID */
  bool direct_io;      /* the loop device does direct I/O */
};

/* The NBD URI of export on the node's gateway. */
int attach_uri (const struct csi_node_conf *n, const char *export_name,
                char *buf, size_t size);
/* Attach a block device to export (node.attach: nbd, nbdfuse, auto),
 * nbdfuse's mount point being fuse_dir; a read-only device when asked.
 * On failure nothing is left attached.
 */
int attach_device (const struct csi_node_conf *n, const char *export_name,
                   const char *fuse_dir, bool readonly, struct attach *a,
                   struct csi_err *e);
/* Detach a (success when it is gone already). */
int attach_detach (const struct csi_node_conf *n, struct attach *a,
                   struct csi_err *e);
/* Whether a read of dev's first block succeeds (the device still
 * reaches the gateway).
 */
bool attach_reaches (const char *dev);
/* The size of block device dev in bytes, -1 with *e set on error. */
int attach_dev_size (const char *dev, uint64_t *size, struct csi_err *e);

#endif /* HHC_CSI_NODE_H */

/* ---- node-record.c: STATE/EXPORT.json, one per staged volume ----
 *
 * Written (atomically: a temporary file, fsync, rename) after every
 * step of a stage, so that an unstage, a stage that fails part-way and
 * a hhc-csi restarted after a crash all undo exactly the steps done.
 */
enum rec_step {
  REC_CLAIMED = 1, /* backend_claim done */
  REC_CRED,        /* STATE/EXPORT.cred written (when needed) */
  REC_ADDED,       /* hhcctl volume add done */
  REC_ATTACHED,    /* the device attached */
  REC_STAGED,      /* file system mounted (or block): complete */
};

struct rec {
  enum rec_step step;
  char volume_id[72], export_name[72];
  char staging_path[4096];
  bool block, readonly, cred;
  char fs_type[16];
  struct attach att;
};

/* STATE/EXPORT.SUFFIX into buf; -1 when too long. */
int rec_file (const struct csi_node_conf *n, const char *export_name,
              const char *suffix, char *buf, size_t size);
/* The volume of volume_id on a node: INVALID_ARGUMENT when it is
 * missing or malformed, FAILED_PRECONDITION without a "node" config.
 */
int node_volume (const struct csi_conf *c, const char *volume_id,
                 struct csi_volid *v, struct csi_err *e);
/* 0 and *r; 1 when there is no record; -1 with *e on error. */
int rec_load (const struct csi_node_conf *n, const char *export_name,
              struct rec *r, struct csi_err *e);
int rec_save (const struct csi_node_conf *n, const struct rec *r,
              struct csi_err *e);
int rec_delete (const struct csi_node_conf *n, const char *export_name,
                struct csi_err *e);
/* How many records state_dir holds, -1 with *e on error. */
int rec_count (const struct csi_node_conf *n, struct csi_err *e);

/* ---- node.c, node-publish.c ---- */

#include <pthread.h>

/* Held through every node call: they touch the same records, mounts
 * and devices, and none is frequent enough to need finer locks.
 */
extern pthread_mutex_t node_lock;

/* Whether a and b name the same path (trailing slashes aside). */
bool node_same_path (const char *a, const char *b);

/* ---- node-gateway.c ---- */

/* A volume for the gateway (hhc-gateway.json(5) "volumes"). */
struct gw_vol {
  const struct csi_volid *v;
  const char *mode;
  uint64_t cache_size, log_size;
};
/* hhcctl volume add; cred the credentials file or NULL. */
int gateway_add (const struct csi_node_conf *n, const struct gw_vol *g,
                 const char *cred, struct csi_err *e);
/* hhcctl volume remove --drain: FAILED_PRECONDITION when the drain
 * failed (the volume is still there), INTERNAL on other failures.
 */
int gateway_remove (const struct csi_node_conf *n, const char *export_name,
                    bool drain, struct csi_err *e);
/* Unlink the volume's cache and log files (after a drain), once
 * `hhcctl format` agrees they hold nothing the backend lacks and
 * nothing has them open; else FAILED_PRECONDITION and they stay.
 */
int gateway_remove_files (const struct csi_node_conf *n,
                          const char *export_name, struct csi_err *e);
