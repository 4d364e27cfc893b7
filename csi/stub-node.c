/* Placeholder until node.c lands: every call is UNAVAILABLE.  Remove
 * this file (and its Makefile.am line) with that commit.
 */
#include <config.h>

#include "csi.h"

int
csi_node_stage (const struct csi_conf *c, const struct csi_stage_req *r,
                struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_node_unstage (const struct csi_conf *c, const char *node_id,
                  const char *volume_id, const char *staging_path,
                  struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_node_publish (const struct csi_conf *c, const struct csi_publish_req *r,
                  struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_node_unpublish (const struct csi_conf *c, const char *volume_id,
                    const char *target_path, struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}

int
csi_node_stats (const struct csi_conf *c, const char *volume_id,
                const char *volume_path, struct csi_stats *st,
                struct csi_err *e)
{
  return csi_fail (e, CSI_UNAVAILABLE, "not built yet");
}
