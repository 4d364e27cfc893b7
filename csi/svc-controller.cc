// hhc-csi: the CSI Controller service: volumes made and removed in
// their backends (controller.c does the work).
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

// Every capability of a request must be one hhc-csi serves.
bool
capabilities_ok (
    const google::protobuf::RepeatedPtrField<VolumeCapability> &caps,
    std::string *why)
{
  bool ro;

  if (caps.empty ())
    {
      *why = "volume_capabilities is missing";
      return false;
    }
  for (const auto &c : caps)
    if (!capability_ok (c, why, &ro))
      return false;
  return true;
}

class ControllerService final : public Controller::Service
{
public:
  explicit ControllerService (const Driver &d) : d_ (d)
  {
  }

  Status CreateVolume (ServerContext *, const CreateVolumeRequest *q,
                       CreateVolumeResponse *r) override
  {
    Status st = create (q, r);
    log_call ("CreateVolume", q->name (), st);
    return st;
  }

  Status DeleteVolume (ServerContext *, const DeleteVolumeRequest *q,
                       DeleteVolumeResponse *) override
  {
    Status st = remove (q);
    log_call ("DeleteVolume", q->volume_id (), st);
    return st;
  }

  Status
  ValidateVolumeCapabilities (ServerContext *,
                              const ValidateVolumeCapabilitiesRequest *q,
                              ValidateVolumeCapabilitiesResponse *r) override;

  Status
  ControllerGetCapabilities (ServerContext *,
                             const ControllerGetCapabilitiesRequest *,
                             ControllerGetCapabilitiesResponse *r) override
  {
    r->add_capabilities ()->mutable_rpc ()->set_type (
        ControllerServiceCapability::RPC::CREATE_DELETE_VOLUME);
    return Status::OK;
  }

private:
  Status create (const CreateVolumeRequest *q, CreateVolumeResponse *r);
  Status remove (const DeleteVolumeRequest *q);

  const Driver &d_;
};

Status
ControllerService::create (const CreateVolumeRequest *q,
                           CreateVolumeResponse *r)
{
  Status st;
  std::string why;

  if (!need_config (d_, false, &st))
    return st;
  if (q->name ().empty ())
    return fail (StatusCode::INVALID_ARGUMENT, "name is missing");
  if (!capabilities_ok (q->volume_capabilities (), &why))
    return fail (StatusCode::INVALID_ARGUMENT, why);
  if (q->capacity_range ().required_bytes () < 0
      || q->capacity_range ().limit_bytes () < 0)
    return fail (StatusCode::INVALID_ARGUMENT,
                 "capacity_range: bytes may not be negative");
  VolumeGuard guard ("name/" + q->name ());
  if (guard.busy ())
    return fail (StatusCode::ABORTED,
                 "a call for volume " + q->name () + " is in progress");

  Map params (q->parameters ()), secrets (q->secrets ());
  struct csi_create_req cq = {
    q->name ().c_str (),
    static_cast<uint64_t> (q->capacity_range ().required_bytes ()),
    static_cast<uint64_t> (q->capacity_range ().limit_bytes ()),
    params.get (),
    secrets.get (),
  };
  struct csi_volume_out out = {};
  struct csi_err e = {};
  if (csi_create_volume (&d_.conf, &cq, &out, &e) == -1)
    return status (e);
  Volume *v = r->mutable_volume ();
  v->set_volume_id (out.id);
  v->set_capacity_bytes (static_cast<int64_t> (out.capacity));
  for (size_t i = 0; i < out.nctx; i++)
    (*v->mutable_volume_context ())[out.ctx[i].key] = out.ctx[i].value;
  return Status::OK;
}

Status
ControllerService::remove (const DeleteVolumeRequest *q)
{
  Status st;

  if (!need_config (d_, false, &st))
    return st;
  if (q->volume_id ().empty ())
    return fail (StatusCode::INVALID_ARGUMENT, "volume_id is missing");
  VolumeGuard guard (q->volume_id ());
  if (guard.busy ())
    return fail (StatusCode::ABORTED,
                 "a call for volume " + q->volume_id () + " is in progress");
  Map secrets (q->secrets ());
  struct csi_map sm = secrets.get ();
  struct csi_err e = {};
  if (csi_delete_volume (&d_.conf, q->volume_id ().c_str (), &sm, &e) == -1)
    return status (e);
  return Status::OK;
}

Status
ControllerService::ValidateVolumeCapabilities (
    ServerContext *, const ValidateVolumeCapabilitiesRequest *q,
    ValidateVolumeCapabilitiesResponse *r)
{
  Status st;
  std::string why;

  if (!need_config (d_, false, &st))
    return st;
  if (q->volume_id ().empty ())
    return fail (StatusCode::INVALID_ARGUMENT, "volume_id is missing");
  if (q->volume_capabilities ().empty ())
    return fail (StatusCode::INVALID_ARGUMENT,
                 "volume_capabilities is missing");
  Map secrets (q->secrets ()), ctx (q->volume_context ());
  struct csi_map sm = secrets.get (), cm = ctx.get ();
  struct csi_params p;
  struct csi_err e = {};
  uint64_t size;
  if (csi_volume_size (&d_.conf, q->volume_id ().c_str (), &sm, &size, &e) == -1
      || csi_params_parse (&cm, &p, &e) == -1)
    return status (e);
  if (!capabilities_ok (q->volume_capabilities (), &why))
    {
      r->set_message (why);
      return Status::OK;
    }
  auto *c = r->mutable_confirmed ();
  *c->mutable_volume_capabilities () = q->volume_capabilities ();
  *c->mutable_volume_context () = q->volume_context ();
  *c->mutable_parameters () = q->parameters ();
  return Status::OK;
}

} // namespace

std::unique_ptr<grpc::Service>
make_controller (const Driver &d)
{
  return std::make_unique<ControllerService> (d);
}

} // namespace hhccsi
