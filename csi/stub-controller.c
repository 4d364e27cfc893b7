/* Placeholder until controller.c lands: every call is UNAVAILABLE.
 * Remove this file (and its Makefile.am line) with that commit.
 */
#include <config.h>

#include "csi.h"

int
csi_create_volume (const struct csi_conf *c, const struct csi_create_req *r,
                   struct csi_volume_out *out, struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_delete_volume (const struct csi_conf *c, const char *id,
                   const struct csi_map *secrets, struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_volume_size (const struct csi_conf *c, const char *id,
                 const struct csi_map *secrets, uint64_t *size,
                 struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}
