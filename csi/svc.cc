// hhc-csi's gRPC layer: the helpers the services share (svc.h).
#include <config.h>

#include "svc.h"

namespace hhccsi
{

Map::Map (const google::protobuf::Map<std::string, std::string> &m)
{
  for (const auto &p : m)
    kv_.push_back ({ p.first.c_str (), p.second.c_str () });
}

grpc::Status
fail (grpc::StatusCode code, const std::string &msg)
{
  return grpc::Status (code, msg);
}

grpc::Status
status (const struct csi_err &e)
{
  if (e.code == CSI_OK)
    return grpc::Status::OK;
  return grpc::Status (static_cast<grpc::StatusCode> (e.code), e.msg);
}

std::mutex VolumeGuard::lock_;
std::set<std::string> VolumeGuard::inflight_;

VolumeGuard::VolumeGuard (const std::string &id) : id_ (id)
{
  std::lock_guard<std::mutex> g (lock_);
  busy_ = !inflight_.insert (id).second;
}

VolumeGuard::~VolumeGuard ()
{
  if (!busy_)
    {
      std::lock_guard<std::mutex> g (lock_);
      inflight_.erase (id_);
    }
}

bool
capability_ok (const csi::v1::VolumeCapability &c, std::string *why,
               bool *readonly)
{
  using Mode = csi::v1::VolumeCapability::AccessMode;

  if (!c.has_block () && !c.has_mount ())
    {
      *why = "volume capability: access type (block or mount) is missing";
      return false;
    }
  for (const auto &f : c.mount ().mount_flags ())
    if (f.empty () || f.find ('\0') != std::string::npos)
      {
        *why = "volume capability: a mount flag is empty or holds a NUL byte";
        return false;
      }
  switch (c.access_mode ().mode ())
    {
    case Mode::SINGLE_NODE_WRITER:
    case Mode::SINGLE_NODE_SINGLE_WRITER:
    case Mode::SINGLE_NODE_MULTI_WRITER:
      *readonly = false;
      return true;
    case Mode::SINGLE_NODE_READER_ONLY:
      *readonly = true;
      return true;
    case Mode::UNKNOWN:
      *why = "volume capability: access mode is missing";
      return false;
    default:
      *why = "access mode " + Mode::Mode_Name (c.access_mode ().mode ())
             + " is not supported: a volume is cached on one node at a "
               "time";
      return false;
    }
}

bool
need_config (const Driver &d, bool node, grpc::Status *st)
{
  if (!d.configured)
    *st = fail (grpc::StatusCode::FAILED_PRECONDITION,
                "hhc-csi has no config: " + d.config_file
                    + " was not read (hhc-csi(8) CONFIGURATION)");
  else if (node && !d.conf.have_node)
    *st = fail (grpc::StatusCode::FAILED_PRECONDITION,
                d.config_file + " has no \"node\" section");
  else
    return true;
  return false;
}

void
log_call (const char *method, const std::string &volume, const grpc::Status &st)
{
  if (st.ok ())
    csi_log ("%s %s: ok", method, volume.c_str ());
  else
    csi_log ("%s %s: %d %s", method, volume.c_str (),
             static_cast<int> (st.error_code ()), st.error_message ().c_str ());
}

} // namespace hhccsi
