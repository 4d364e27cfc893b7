/* hhc-csi: the backend types behind backend.h (backend.c dispatches on
 * v->backend->type).  Each function has the contract of the backend.h
 * function of the same verb.
 */
#ifndef HHC_CSI_BACKEND_INT_H
#define HHC_CSI_BACKEND_INT_H

#include "backend.h"

/* backend-file.c: DIR/NAME.img, DIR/NAME.claim */
int file_create (const struct csi_volid *v, uint64_t size, uint64_t *actual,
                 bool *existed, struct csi_err *e);
int file_delete (const struct csi_volid *v, struct csi_err *e);
int file_size (const struct csi_volid *v, uint64_t *size, struct csi_err *e);
int file_claim (const struct csi_volid *v, const char *node_id,
                struct csi_err *e);
int file_release (const struct csi_volid *v, const char *node_id,
                  struct csi_err *e);
char *file_gateway_json (const struct csi_volid *v, struct csi_err *e);

/* backend-cos.c: the cos plugin's volume at PREFIX/NAME */
int cos_create (const struct csi_volid *v, uint64_t size,
                const struct csi_map *secrets, uint64_t *actual, bool *existed,
                struct csi_err *e);
int cos_delete (const struct csi_volid *v, const struct csi_map *secrets,
                struct csi_err *e);
int cos_size (const struct csi_volid *v, const struct csi_map *secrets,
              uint64_t *size, struct csi_err *e);
int cos_claim (const struct csi_volid *v, const char *node_id,
               const struct csi_map *secrets, struct csi_err *e);
int cos_release (const struct csi_volid *v, const char *node_id,
                 const struct csi_map *secrets, struct csi_err *e);
char *cos_gateway_json (const struct csi_volid *v, const char *cred_file,
                        struct csi_err *e);
/* Keys per ListObjectsV2 page (1000; the unit test makes it small to
 * exercise paging).
 */
extern unsigned cos_list_max_keys;

/* backend-iscsi.c: the config's pre-provisioned LUNs; claims
 * CLAIMS_DIR/LUN.claim
 */
int iscsi_create (const struct csi_volid *v, struct csi_err *e);
int iscsi_delete (const struct csi_volid *v, struct csi_err *e);
int iscsi_size (const struct csi_volid *v, uint64_t *size, struct csi_err *e);
int iscsi_claim (const struct csi_volid *v, const char *node_id,
                 struct csi_err *e);
int iscsi_release (const struct csi_volid *v, const char *node_id,
                   struct csi_err *e);
char *iscsi_gateway_json (const struct csi_volid *v, struct csi_err *e);

/* backend.c: the JSON text of OBJ (a jansson json_t *, stolen), or
 * NULL with INTERNAL in *e.
 */
char *backend_json_dump (void *obj, struct csi_err *e);

#endif /* HHC_CSI_BACKEND_INT_H */
