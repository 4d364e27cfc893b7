/* hhc-csi: the controller's volume calls (csi.h).  CreateVolume
 * decides the size and the id and leaves the rest to the backend
 * (backend.h); DeleteVolume and the size look-up parse the id first.
 *
 * Size: the required bytes rounded up to the backend's granularity
 * (file 4 KiB, cos its object size, 1 MiB by default); with only a
 * limit, the limit rounded down; with neither, DEFAULT_SIZE (or the
 * backend's max_size when smaller).  A size over the limit or over the
 * backend's max_size is OUT_OF_RANGE.  A volume that exists already is
 * returned when its size is within [required, limit], else it is
 * ALREADY_EXISTS.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "csi.h"

#define DEFAULT_SIZE (UINT64_C (1) << 30)

/* The unit sizes of volumes on B are multiples of. */
static uint64_t
granularity (const struct csi_backend *b)
{
  switch (b->type)
    {
    case CSI_FILE:
      return 4096;
    case CSI_COS:
      return b->object_size ? b->object_size : 1024 * 1024;
    case CSI_ISCSI:
      break;
    }
  return 512;
}

/* The size to make for R on B. */
static int
choose_size (const struct csi_backend *b, const struct csi_create_req *r,
             uint64_t *size, struct csi_err *e)
{
  uint64_t g = granularity (b), want;

  if (r->limit && r->required > r->limit)
    return csi_fail (e, CSI_OUT_OF_RANGE,
                     "required_bytes %" PRIu64 " > limit_bytes %" PRIu64,
                     r->required, r->limit);
  if (r->required > UINT64_MAX - g)
    return csi_fail (e, CSI_OUT_OF_RANGE,
                     "required_bytes %" PRIu64 ": too large", r->required);
  if (r->required)
    want = (r->required + g - 1) / g * g;
  else if (r->limit)
    want = r->limit / g * g;
  else
    {
      want = DEFAULT_SIZE;
      if (b->max_size && want > b->max_size)
        want = b->max_size / g * g;
    }
  if (want == 0 || (r->limit && want > r->limit))
    return csi_fail (e, CSI_OUT_OF_RANGE,
                     "no size in %" PRIu64 "..%" PRIu64
                     " bytes is a multiple of %" PRIu64 " (backend %s)",
                     r->required, r->limit, g, b->name);
  if (b->max_size && want > b->max_size)
    return csi_fail (e, CSI_OUT_OF_RANGE,
                     "%" PRIu64 " bytes: backend %s makes volumes of at most "
                     "%" PRIu64 " bytes",
                     want, b->name, b->max_size);
  *size = want;
  return 0;
}

/* The volume context: the parameters a node reads back. */
static void
set_context (const struct csi_params *p, struct csi_volume_out *out)
{
  out->nctx = 0;
  if (p->mode)
    out->ctx[out->nctx++] = (struct csi_kv){ "mode", p->mode };
  if (p->cache_size)
    out->ctx[out->nctx++] = (struct csi_kv){ "cacheSize", p->cache_size };
  if (p->log_size)
    out->ctx[out->nctx++] = (struct csi_kv){ "logSize", p->log_size };
}

/* The id of NAME on BACKEND, parsed (csi_volid_parse). */
static int
make_volid (const struct csi_conf *c, const char *backend, const char *name,
            struct csi_volid *v, struct csi_err *e)
{
  char id[sizeof v->id + 1];

  if (csi_conf_backend (c, backend) == NULL)
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "parameter backend: no backend %s in the config", backend);
  if (snprintf (id, sizeof id, "%s:%s", backend, name) >= (int)sizeof v->id)
    return csi_fail (e, CSI_INVALID_ARGUMENT, "name %s: too long", name);
  return csi_volid_parse (c, id, v, e);
}

int
csi_create_volume (const struct csi_conf *c, const struct csi_create_req *r,
                   struct csi_volume_out *out, struct csi_err *e)
{
  struct csi_params p;
  struct csi_volid v;
  uint64_t size = 0, actual = 0;
  bool existed = false;

  if (r->name == NULL || !csi_name_valid (r->name))
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "name %s: expected 1 to %d of A-Z a-z 0-9 . _ -",
                     r->name ? r->name : "(missing)", CSI_NAME_MAX);
  if (csi_params_parse (&r->params, &p, e) == -1)
    return -1;
  if (p.backend == NULL)
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "the parameter backend is required");
  if (make_volid (c, p.backend, r->name, &v, e) == -1
      || choose_size (v.backend, r, &size, e) == -1
      || backend_create (&v, size, &r->secrets, &actual, &existed, e) == -1)
    return -1;
  if (existed && (actual < r->required || (r->limit && actual > r->limit)))
    return csi_fail (e, CSI_ALREADY_EXISTS,
                     "volume %s exists with %" PRIu64 " bytes, not within "
                     "the %" PRIu64 "..%" PRIu64 " bytes asked for",
                     v.id, actual, r->required, r->limit);
  snprintf (out->id, sizeof out->id, "%s", v.id);
  out->capacity = actual;
  set_context (&p, out);
  return 0;
}

int
csi_delete_volume (const struct csi_conf *c, const char *id,
                   const struct csi_map *secrets, struct csi_err *e)
{
  struct csi_volid v;

  if (csi_volid_parse (c, id, &v, e) == -1)
    return -1;
  return backend_delete (&v, secrets, e);
}

int
csi_volume_size (const struct csi_conf *c, const char *id,
                 const struct csi_map *secrets, uint64_t *size,
                 struct csi_err *e)
{
  struct csi_volid v;

  if (csi_volid_parse (c, id, &v, e) == -1)
    return -1;
  return backend_size (&v, secrets, size, e);
}
