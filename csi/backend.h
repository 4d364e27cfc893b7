/* hhc-csi: what each backend type does (backend-file.c, backend-cos.c,
 * backend-iscsi.c); backend.c dispatches on the type.
 *
 * A claim records which node has a volume staged: its dirty blocks
 * live in that node's cache and log until NodeUnstageVolume drains
 * them, so no other node may stage it meanwhile (hhc-csi(8) "A NODE
 * THAT DIES").  file: DIR/NAME.claim made with link() (EEXIST when
 * taken); cos: the object PREFIX/NAME/hhc-csi.claim made with
 * If-None-Match; iscsi: CLAIMS_DIR/LUN.claim, made as the file
 * backend's (claim-file.c) in a directory every node mounts.  A claim
 * holds the node id on its first line.
 */
#ifndef HHC_CSI_BACKEND_H
#define HHC_CSI_BACKEND_H

#include "csi.h"

/* Make volume v of size bytes unless it exists.  *size is set to the
 * size of the volume that is there afterwards (the existing one's own
 * size when it existed: the caller checks it against the request).
 * *existed tells which.
 */
int backend_create (const struct csi_volid *v, uint64_t size,
                    const struct csi_map *secrets, uint64_t *actual,
                    bool *existed, struct csi_err *e);

/* Remove volume v and everything it holds; a missing one is success;
 * a claimed one is FAILED_PRECONDITION naming the node.
 */
int backend_delete (const struct csi_volid *v, const struct csi_map *secrets,
                    struct csi_err *e);

/* 0 and *size when it exists; NOT_FOUND when not. */
int backend_size (const struct csi_volid *v, const struct csi_map *secrets,
                  uint64_t *size, struct csi_err *e);

/* Claim v for node_id: success when unclaimed (the claim is made) or
 * claimed by node_id already; FAILED_PRECONDITION when another node
 * holds it ("volume ID is staged on node N").
 */
int backend_claim (const struct csi_volid *v, const char *node_id,
                   const struct csi_map *secrets, struct csi_err *e);

/* Drop node_id's claim on v (success when there is none; another
 * node's claim is left alone and is FAILED_PRECONDITION).
 */
int backend_release (const struct csi_volid *v, const char *node_id,
                     const struct csi_map *secrets, struct csi_err *e);

/* The "backend" object of v's hhc-gateway volume (hhc-gateway.json(5)
 * "backend"), as JSON text (malloc'd); credentials, when the backend
 * needs them, are in the file cred_file (the node wrote it, mode 0600).
 * NULL with *e set on failure.
 */
char *backend_gateway_json (const struct csi_volid *v, const char *cred_file,
                            struct csi_err *e);

/* Whether the backend needs a credentials file at stage time (cos:
 * from the secrets access_key and secret_key).
 */
bool backend_needs_credentials (const struct csi_volid *v);

#endif /* HHC_CSI_BACKEND_H */
