/* hhc-csi: backend.h's functions, dispatched on the backend's type to
 * backend-file.c, backend-cos.c and backend-iscsi.c.
 *
 *   type   volume                 claim               delete
 *   file   DIR/NAME.img (sparse)  DIR/NAME.claim      the image
 *   cos    PREFIX/NAME/...        .../hhc-csi.claim   every object
 *   iscsi  a configured LUN       CLAIMS_DIR/LUN.claim nothing (static)
 */
#include <config.h>

#include <stdlib.h>

#include <jansson.h>

#include "backend-int.h"

int
backend_create (const struct csi_volid *v, uint64_t size,
                const struct csi_map *secrets, uint64_t *actual, bool *existed,
                struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_create (v, size, actual, existed, e);
    case CSI_COS:
      return cos_create (v, size, secrets, actual, existed, e);
    case CSI_ISCSI:
      return iscsi_create (v, e);
    }
  return csi_fail (e, CSI_INTERNAL, "backend %s: unknown type",
                   v->backend->name);
}

int
backend_delete (const struct csi_volid *v, const struct csi_map *secrets,
                struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_delete (v, e);
    case CSI_COS:
      return cos_delete (v, secrets, e);
    case CSI_ISCSI:
      return iscsi_delete (v, e);
    }
  return csi_fail (e, CSI_INTERNAL, "backend %s: unknown type",
                   v->backend->name);
}

int
backend_size (const struct csi_volid *v, const struct csi_map *secrets,
              uint64_t *size, struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_size (v, size, e);
    case CSI_COS:
      return cos_size (v, secrets, size, e);
    case CSI_ISCSI:
      return iscsi_size (v, size, e);
    }
  return csi_fail (e, CSI_INTERNAL, "backend %s: unknown type",
                   v->backend->name);
}

int
backend_claim (const struct csi_volid *v, const char *node_id,
               const struct csi_map *secrets, struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_claim (v, node_id, e);
    case CSI_COS:
      return cos_claim (v, node_id, secrets, e);
    case CSI_ISCSI:
      return iscsi_claim (v, node_id, e);
    }
  return csi_fail (e, CSI_INTERNAL, "backend %s: unknown type",
                   v->backend->name);
}

int
backend_release (const struct csi_volid *v, const char *node_id,
                 const struct csi_map *secrets, struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_release (v, node_id, e);
    case CSI_COS:
      return cos_release (v, node_id, secrets, e);
    case CSI_ISCSI:
      return iscsi_release (v, node_id, e);
    }
  return csi_fail (e, CSI_INTERNAL, "backend %s: unknown type",
                   v->backend->name);
}

char *
backend_gateway_json (const struct csi_volid *v, const char *cred_file,
                      struct csi_err *e)
{
  switch (v->backend->type)
    {
    case CSI_FILE:
      return file_gateway_json (v, e);
    case CSI_COS:
      return cos_gateway_json (v, cred_file, e);
    case CSI_ISCSI:
      return iscsi_gateway_json (v, e);
    }
  csi_fail (e, CSI_INTERNAL, "backend %s: unknown type", v->backend->name);
  return NULL;
}

bool
backend_needs_credentials (const struct csi_volid *v)
{
  return v->backend->type == CSI_COS;
}

char *
backend_json_dump (void *obj, struct csi_err *e)
{
  json_t *o = obj;
  char *text = o ? json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

  json_decref (o);
  if (text == NULL)
    csi_fail (e, CSI_INTERNAL, "out of memory");
  return text;
}
