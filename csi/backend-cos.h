/* hhc-csi: what backend-cos.c (volumes, claims) and backend-cos-delete.c
 * (listing and deleting a volume's objects) share.
 */
#ifndef HHC_CSI_BACKEND_COS_H
#define HHC_CSI_BACKEND_COS_H

#include "backend-int.h"
#include "s3.h"

/* Room for a key: P (at most PREFIX_MAX - 1 bytes; cos_open refuses a
 * longer backend prefix) and a leaf.
 */
#define PREFIX_MAX 1024
#define KEY_MAX (PREFIX_MAX + 64)

/* P, the volume's prefix: BACKEND_PREFIX/NAME, or NAME. */
void cos_prefix (const struct csi_volid *v, char *out, size_t n);
/* P/LEAF */
void cos_key (const struct csi_volid *v, const char *leaf, char *out, size_t n);
/* A client for v's bucket with the secrets' keys (s3_close it), or
 * NULL with *e set.
 */
struct s3 *cos_open (const struct csi_volid *v, const struct csi_map *secrets,
                     struct csi_err *e);
/* The client failed (errno set): its message into *e; -1. */
int cos_s3_fail (struct csi_err *e);
/* The node id in v's claim: 1 and OWNER, 0 no claim, -1 error. */
int cos_read_claim (struct s3 *s3, const struct csi_volid *v, char *owner,
                    size_t n, struct csi_err *e);
/* FAILED_PRECONDITION "volume ID is staged on node OWNER"; -1. */
int cos_claimed (const struct csi_volid *v, const char *owner,
                 struct csi_err *e);

#endif /* HHC_CSI_BACKEND_COS_H */
