// hhc-csi: the CSI Identity service.  It answers with or without a
// config file, so that the CO and the sidecars can register the
// driver before the node is set up.
#include <config.h>

#include "svc.h"

namespace hhccsi
{
namespace
{

using grpc::ServerContext;
using grpc::Status;
using namespace csi::v1;

class IdentityService final : public Identity::Service
{
public:
  explicit IdentityService (const Driver &d) : d_ (d)
  {
  }

  Status GetPluginInfo (ServerContext *, const GetPluginInfoRequest *,
                        GetPluginInfoResponse *r) override
  {
    r->set_name (CSI_DRIVER_NAME);
    r->set_vendor_version (PACKAGE_VERSION);
    return Status::OK;
  }

  Status GetPluginCapabilities (ServerContext *,
                                const GetPluginCapabilitiesRequest *,
                                GetPluginCapabilitiesResponse *r) override
  {
    r->add_capabilities ()->mutable_service ()->set_type (
        PluginCapability::Service::CONTROLLER_SERVICE);
    return Status::OK;
  }

  // Ready once a config was read: without one, only Identity and the
  // capability calls answer.
  Status Probe (ServerContext *, const ProbeRequest *,
                ProbeResponse *r) override
  {
    r->mutable_ready ()->set_value (d_.configured);
    return Status::OK;
  }

private:
  const Driver &d_;
};

} // namespace

std::unique_ptr<grpc::Service>
make_identity (const Driver &d)
{
  return std::make_unique<IdentityService> (d);
}

} // namespace hhccsi
