/* hhc-csi: files made whole in a directory, and the claims made of
 * them (claim-file.c).  The file backend keeps its images and claims
 * in its dir; the iscsi backend its claims in its claims_dir (a
 * directory every node and the controller mount).
 *
 * A claim is DIR/NAME.claim holding the node id on line 1 (backend.h).
 * Errors name VOLID (the volume id) the way backend.h says.
 */
#ifndef HHC_CSI_CLAIM_FILE_H
#define HHC_CSI_CLAIM_FILE_H

#include "csi.h"

/* Make DIR/NAME.SUFFIX holding TEXT (or SIZE bytes of hole when TEXT
 * is NULL) unless it exists: written under a hidden name, fsync'd,
 * link()ed (EEXIST: it exists), DIR fsync'd.  0 made, 1 it existed,
 * -1 error.
 */
int cf_make_whole (const char *dir, const char *name, const char *suffix,
                   const char *text, uint64_t size, struct csi_err *e);

/* fsync DIR; 0 or -1 with *e set. */
int cf_sync_dir (const char *dir, struct csi_err *e);

/* -1 with *e: "WHAT PATH: strerror (ERR)", RESOURCE_EXHAUSTED when the
 * file system is full, INTERNAL otherwise.
 */
int cf_fail_errno (struct csi_err *e, const char *what, const char *path,
                   int err);

/* The node id in DIR/NAME.claim: 1 and OWNER, 0 no claim, -1 error. */
int cf_claim_read (const char *dir, const char *name, char *owner, size_t n,
                   struct csi_err *e);

/* 0 when DIR/NAME.claim does not exist; FAILED_PRECONDITION naming the
 * node when it does (a delete's check).
 */
int cf_claim_check (const char *dir, const char *name, const char *volid,
                    struct csi_err *e);

/* backend_claim and backend_release (backend.h) on DIR/NAME.claim. */
int cf_claim (const char *dir, const char *name, const char *volid,
              const char *node_id, struct csi_err *e);
int cf_release (const char *dir, const char *name, const char *volid,
                const char *node_id, struct csi_err *e);

#endif /* HHC_CSI_CLAIM_FILE_H */
