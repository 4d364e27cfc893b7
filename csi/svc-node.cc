// hhc-csi: the CSI Node service: a volume staged through this node's
// hhc-gateway, published into pods (node.c does the work).
#include <config.h>

#include "svc.h"

namespace hhccsi
{
namespace
{

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;
using namespace csi::v1;

// The request's fields every Node call checks first.
#define REQUIRE(cond, what)                                                    \
  do                                                                           \
    {                                                                          \
      if (!(cond))                                                             \
        return fail (StatusCode::INVALID_ARGUMENT, what " is missing");        \
    }                                                                          \
  while (0)

#define GUARD(id)                                                              \
  VolumeGuard guard (id);                                                      \
  if (guard.busy ())                                                           \
  return fail (StatusCode::ABORTED,                                            \
               "a call for volume " + (id) + " is in progress")

class NodeService final : public Node::Service
{
public:
  explicit NodeService (const Driver &d) : d_ (d)
  {
  }

  Status NodeStageVolume (ServerContext *, const NodeStageVolumeRequest *q,
                          NodeStageVolumeResponse *) override
  {
    Status st = stage (q);
    log_call ("NodeStageVolume", q->volume_id (), st);
    return st;
  }

  Status NodeUnstageVolume (ServerContext *, const NodeUnstageVolumeRequest *q,
                            NodeUnstageVolumeResponse *) override
  {
    Status st = unstage (q);
    log_call ("NodeUnstageVolume", q->volume_id (), st);
    return st;
  }

  Status NodePublishVolume (ServerContext *, const NodePublishVolumeRequest *q,
                            NodePublishVolumeResponse *) override
  {
    Status st = publish (q);
    log_call ("NodePublishVolume", q->volume_id (), st);
    return st;
  }

  Status NodeUnpublishVolume (ServerContext *,
                              const NodeUnpublishVolumeRequest *q,
                              NodeUnpublishVolumeResponse *) override
  {
    Status st = unpublish (q);
    log_call ("NodeUnpublishVolume", q->volume_id (), st);
    return st;
  }

  Status NodeGetVolumeStats (ServerContext *,
                             const NodeGetVolumeStatsRequest *q,
                             NodeGetVolumeStatsResponse *r) override;

  Status NodeGetCapabilities (ServerContext *,
                              const NodeGetCapabilitiesRequest *,
                              NodeGetCapabilitiesResponse *r) override
  {
    r->add_capabilities ()->mutable_rpc ()->set_type (
        NodeServiceCapability::RPC::STAGE_UNSTAGE_VOLUME);
    r->add_capabilities ()->mutable_rpc ()->set_type (
        NodeServiceCapability::RPC::GET_VOLUME_STATS);
    return Status::OK;
  }

  Status NodeGetInfo (ServerContext *, const NodeGetInfoRequest *,
                      NodeGetInfoResponse *r) override
  {
    r->set_node_id (d_.node_id);
    if (d_.configured && d_.conf.have_node)
      r->set_max_volumes_per_node (d_.conf.node.max_volumes);
    return Status::OK;
  }

private:
  Status stage (const NodeStageVolumeRequest *q);
  Status unstage (const NodeUnstageVolumeRequest *q);
  Status publish (const NodePublishVolumeRequest *q);
  Status unpublish (const NodeUnpublishVolumeRequest *q);

  const Driver &d_;
};

// The mount flags as a C array (pointers into the request).
std::vector<const char *>
flags_of (const VolumeCapability &c)
{
  std::vector<const char *> v;
  for (const auto &f : c.mount ().mount_flags ())
    v.push_back (f.c_str ());
  return v;
}

Status
NodeService::stage (const NodeStageVolumeRequest *q)
{
  Status st;
  std::string why;
  bool ro;

  REQUIRE (!q->volume_id ().empty (), "volume_id");
  REQUIRE (!q->staging_target_path ().empty (), "staging_target_path");
  REQUIRE (q->has_volume_capability (), "volume_capability");
  if (!capability_ok (q->volume_capability (), &why, &ro))
    return fail (StatusCode::INVALID_ARGUMENT, why);
  if (!need_config (d_, true, &st))
    return st;
  GUARD (q->volume_id ());

  const VolumeCapability &c = q->volume_capability ();
  Map secrets (q->secrets ()), ctx (q->volume_context ());
  std::vector<const char *> flags = flags_of (c);
  struct csi_stage_req r = {};
  r.node_id = d_.node_id.c_str ();
  r.volume_id = q->volume_id ().c_str ();
  r.staging_path = q->staging_target_path ().c_str ();
  r.block = c.has_block ();
  r.fs_type = c.mount ().fs_type ().c_str ();
  r.mount_flags = flags.data ();
  r.nflags = flags.size ();
  r.readonly = ro;
  r.secrets = secrets.get ();
  r.context = ctx.get ();
  struct csi_err e = {};
  if (csi_node_stage (&d_.conf, &r, &e) == -1)
    return status (e);
  return Status::OK;
}

Status
NodeService::unstage (const NodeUnstageVolumeRequest *q)
{
  Status st;

  REQUIRE (!q->volume_id ().empty (), "volume_id");
  REQUIRE (!q->staging_target_path ().empty (), "staging_target_path");
  if (!need_config (d_, true, &st))
    return st;
  GUARD (q->volume_id ());
  struct csi_err e = {};
  if (csi_node_unstage (&d_.conf, d_.node_id.c_str (), q->volume_id ().c_str (),
                        q->staging_target_path ().c_str (), &e)
      == -1)
    return status (e);
  return Status::OK;
}

Status
NodeService::publish (const NodePublishVolumeRequest *q)
{
  Status st;
  std::string why;
  bool ro;

  REQUIRE (!q->volume_id ().empty (), "volume_id");
  REQUIRE (!q->staging_target_path ().empty (), "staging_target_path");
  REQUIRE (!q->target_path ().empty (), "target_path");
  REQUIRE (q->has_volume_capability (), "volume_capability");
  if (!capability_ok (q->volume_capability (), &why, &ro))
    return fail (StatusCode::INVALID_ARGUMENT, why);
  if (!need_config (d_, true, &st))
    return st;
  GUARD (q->volume_id ());

  const VolumeCapability &c = q->volume_capability ();
  std::vector<const char *> flags = flags_of (c);
  struct csi_publish_req r = {};
  r.volume_id = q->volume_id ().c_str ();
  r.staging_path = q->staging_target_path ().c_str ();
  r.target_path = q->target_path ().c_str ();
  r.block = c.has_block ();
  r.readonly = q->readonly () || ro;
  r.mount_flags = flags.data ();
  r.nflags = flags.size ();
  struct csi_err e = {};
  if (csi_node_publish (&d_.conf, &r, &e) == -1)
    return status (e);
  return Status::OK;
}

Status
NodeService::unpublish (const NodeUnpublishVolumeRequest *q)
{
  Status st;

  REQUIRE (!q->volume_id ().empty (), "volume_id");
  REQUIRE (!q->target_path ().empty (), "target_path");
  if (!need_config (d_, true, &st))
    return st;
  GUARD (q->volume_id ());
  struct csi_err e = {};
  if (csi_node_unpublish (&d_.conf, q->volume_id ().c_str (),
                          q->target_path ().c_str (), &e)
      == -1)
    return status (e);
  return Status::OK;
}

Status
NodeService::NodeGetVolumeStats (ServerContext *,
                                 const NodeGetVolumeStatsRequest *q,
                                 NodeGetVolumeStatsResponse *r)
{
  Status st;

  REQUIRE (!q->volume_id ().empty (), "volume_id");
  REQUIRE (!q->volume_path ().empty (), "volume_path");
  if (!need_config (d_, true, &st))
    return st;
  struct csi_stats s = {};
  struct csi_err e = {};
  if (csi_node_stats (&d_.conf, q->volume_id ().c_str (),
                      q->volume_path ().c_str (), &s, &e)
      == -1)
    return status (e);
  VolumeUsage *u = r->add_usage ();
  u->set_unit (VolumeUsage::BYTES);
  u->set_total (static_cast<int64_t> (s.bytes_total));
  if (s.block)
    return Status::OK;
  u->set_available (static_cast<int64_t> (s.bytes_avail));
  u->set_used (static_cast<int64_t> (s.bytes_used));
  u = r->add_usage ();
  u->set_unit (VolumeUsage::INODES);
  u->set_total (static_cast<int64_t> (s.inodes_total));
  u->set_available (static_cast<int64_t> (s.inodes_avail));
  u->set_used (static_cast<int64_t> (s.inodes_used));
  return Status::OK;
}

} // namespace

std::unique_ptr<grpc::Service>
make_node (const Driver &d)
{
  return std::make_unique<NodeService> (d);
}

} // namespace hhccsi
