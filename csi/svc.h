// hhc-csi's gRPC layer: what the three services share (svc.cc).  The
// services only check the request's shape, turn it into csi.h's
// structures, call the C core and turn its answer back; every rule of
// the driver lives in the C files.
#ifndef HHC_CSI_SVC_H
#define HHC_CSI_SVC_H

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "csi.grpc.pb.h"
#include "csi.h"

namespace hhccsi
{

// What every service sees: the node id and, when a config file was
// read, the config.
struct Driver {
  std::string node_id;
  std::string config_file; // named even when it was not read
  bool configured = false;
  struct csi_conf conf = {};
};

// A protobuf map<string,string> as a csi_map: the pairs point into
// the request, which outlives the call.
class Map
{
public:
  explicit Map (const google::protobuf::Map<std::string, std::string> &m);
  struct csi_map get () const
  {
    return { kv_.data (), kv_.size () };
  }

private:
  std::vector<struct csi_kv> kv_;
};

// A csi_err (or a code and message) as a gRPC status.
grpc::Status status (const struct csi_err &e);
grpc::Status fail (grpc::StatusCode code, const std::string &msg);

// One call per volume at a time: a second call for a volume whose
// call has not returned is ABORTED, as the CSI specification allows.
class VolumeGuard
{
public:
  explicit VolumeGuard (const std::string &id);
  ~VolumeGuard ();
  bool busy () const
  {
    return busy_;
  }

private:
  std::string id_;
  bool busy_;
  static std::mutex lock_;
  static std::set<std::string> inflight_;
};

// Whether hhc-csi can serve a volume with capability c: a block or a
// mount access type, and an access mode of a single node (a volume is
// cached on one node at a time).  *readonly: the mode only reads.
bool capability_ok (const csi::v1::VolumeCapability &c, std::string *why,
                    bool *readonly);

// FAILED_PRECONDITION unless the config has what the call needs.
bool need_config (const Driver &d, bool node, grpc::Status *st);

// One line per call on standard error: the method and the volume, never
// secrets, mount flags or parameters' values.
void log_call (const char *method, const std::string &volume,
               const grpc::Status &st);

// The three services (svc-identity.cc, svc-controller.cc, svc-node.cc).
std::unique_ptr<grpc::Service> make_identity (const Driver &d);
std::unique_ptr<grpc::Service> make_controller (const Driver &d);
std::unique_ptr<grpc::Service> make_node (const Driver &d);

} // namespace hhccsi

#endif // HHC_CSI_SVC_H
