/* hhc-csi: the iscsi backend.  Its volumes are the LUNs the config
 * lists (static PersistentVolumes with volumeHandle BACKEND:LUN):
 * CreateVolume refuses, DeleteVolume succeeds without touching the
 * LUN's data, the size is the LUN's READ CAPACITY(16) through
 * libiscsi's sync API (CHAP from the LUN's chap_file: user on line 1,
 * password on line 2, never on a command line).  A LUN's claim is
 * CLAIMS_DIR/LUN.claim, made as the file backend makes its claims
 * (claim-file.c); CLAIMS_DIR is a directory every node and the
 * controller mount (an NFS export; a hostPath on a single node), so no
 * node stages a LUN another one holds.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#ifdef HHC_CSI_LIBISCSI
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#endif

#include "backend-int.h"
#include "claim-file.h"

#define CSI_INITIATOR "iqn.2026-01.org.hhc-gateway:hhc-csi"

static const struct csi_lun *
find_lun (const struct csi_volid *v, struct csi_err *e)
{
  const struct csi_backend *b = v->backend;

  for (unsigned i = 0; i < b->nluns; i++)
    if (strcmp (b->luns[i].name, v->name) == 0)
      return &b->luns[i];
  csi_fail (e, CSI_NOT_FOUND, "volume %s: backend %s has no LUN %s", v->id,
            b->name, v->name);
  return NULL;
}

int
iscsi_create (const struct csi_volid *v, struct csi_err *e)
{
  return csi_fail (e, CSI_INVALID_ARGUMENT,
                   "backend %s holds pre-provisioned LUNs: use a static "
                   "PersistentVolume with volumeHandle %s:LUN",
                   v->backend->name, v->backend->name);
}

/* A static volume outlives its PersistentVolume: the LUN and its data
 * stay as they are.  A claimed one is refused all the same (it is
 * staged somewhere).
 */
int
iscsi_delete (const struct csi_volid *v, struct csi_err *e)
{
  if (cf_claim_check (v->backend->claims_dir, v->name, v->id, e) == -1)
    return -1;
  if (find_lun (v, e) == NULL)
    {
      /* not (or no longer) configured: nothing to delete */
      e->code = CSI_OK;
      e->msg[0] = '\0';
      return 0;
    }
  csi_log ("DeleteVolume %s: a pre-provisioned LUN; its data is left as "
           "it is",
           v->id);
  return 0;
}

/* Only a configured LUN is claimed. */
int
iscsi_claim (const struct csi_volid *v, const char *node_id, struct csi_err *e)
{
  if (find_lun (v, e) == NULL)
    return -1;
  return cf_claim (v->backend->claims_dir, v->name, v->id, node_id, e);
}

int
iscsi_release (const struct csi_volid *v, const char *node_id,
               struct csi_err *e)
{
  return cf_release (v->backend->claims_dir, v->name, v->id, node_id, e);
}

#ifdef HHC_CSI_LIBISCSI
/* CHAP user and password from FILE into ctx. */
static int
set_chap (struct iscsi_context *ctx, const char *file, struct csi_err *e)
{
  char user[256] = "", pass[256] = "";
  FILE *f = fopen (file, "re");

  if (f == NULL)
    return csi_fail (e, CSI_FAILED_PRECONDITION, "chap_file %s: cannot open",
                     file);
  if (fgets (user, sizeof user, f) == NULL
      || fgets (pass, sizeof pass, f) == NULL)
    {
      fclose (f);
      return csi_fail (e, CSI_FAILED_PRECONDITION,
                       "chap_file %s: expected two lines (user, password)",
                       file);
    }
  fclose (f);
  user[strcspn (user, "\r\n")] = '\0';
  pass[strcspn (pass, "\r\n")] = '\0';
  if (iscsi_set_initiator_username_pwd (ctx, user, pass) != 0)
    return csi_fail (e, CSI_FAILED_PRECONDITION, "chap_file %s: %s", file,
                     iscsi_get_error (ctx));
  return 0;
}

/* Log in to the LUN's target, READ CAPACITY(16). */
static int
lun_capacity (struct iscsi_context *ctx, const struct csi_lun *l,
              uint64_t *size, struct csi_err *e)
{
  struct iscsi_url *u = iscsi_parse_full_url (ctx, l->url);
  struct scsi_task *t;
  struct scsi_readcapacity16 *rc;
  int r = -1;

  if (u == NULL)
    return csi_fail (e, CSI_FAILED_PRECONDITION, "LUN %s: url %s: %s", l->name,
                     l->url, iscsi_get_error (ctx));
  iscsi_set_targetname (ctx, u->target);
  iscsi_set_session_type (ctx, ISCSI_SESSION_NORMAL);
  iscsi_set_header_digest (ctx, ISCSI_HEADER_DIGEST_NONE_CRC32C);
  iscsi_set_timeout (ctx, 30);
  if ((l->chap_file == NULL || set_chap (ctx, l->chap_file, e) == 0)
      && iscsi_full_connect_sync (ctx, u->portal, u->lun) != 0)
    csi_fail (e, CSI_UNAVAILABLE, "LUN %s: cannot log in to %s: %s", l->name,
              u->portal, iscsi_get_error (ctx));
  else if (iscsi_is_logged_in (ctx)
           && (t = iscsi_readcapacity16_sync (ctx, u->lun)) != NULL)
    {
      rc = t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall (t) : NULL;
      if (rc)
        {
          *size = (rc->returned_lba + 1) * (uint64_t)rc->block_length;
          r = 0;
        }
      else
        csi_fail (e, CSI_UNAVAILABLE, "LUN %s: READ CAPACITY(16) failed: %s",
                  l->name, iscsi_get_error (ctx));
      scsi_free_scsi_task (t);
    }
  else if (iscsi_is_logged_in (ctx))
    csi_fail (e, CSI_UNAVAILABLE, "LUN %s: READ CAPACITY(16): %s", l->name,
              iscsi_get_error (ctx));
  iscsi_destroy_url (u);
  return r;
}

int
iscsi_size (const struct csi_volid *v, uint64_t *size, struct csi_err *e)
{
  const struct csi_lun *l = find_lun (v, e);
  struct iscsi_context *ctx;
  int r;

  if (l == NULL)
    return -1;
  ctx = iscsi_create_context (CSI_INITIATOR);
  if (ctx == NULL)
    return csi_fail (e, CSI_INTERNAL, "out of memory");
  r = lun_capacity (ctx, l, size, e);
  if (iscsi_is_logged_in (ctx))
    iscsi_logout_sync (ctx);
  iscsi_destroy_context (ctx);
  return r;
}
#else
int
iscsi_size (const struct csi_volid *v, uint64_t *size, struct csi_err *e)
{
  (void)size;
  if (find_lun (v, e) == NULL)
    return -1;
  return csi_fail (e, CSI_UNAVAILABLE,
                   "volume %s: hhc-csi was built without libiscsi", v->id);
}
#endif

char *
iscsi_gateway_json (const struct csi_volid *v, struct csi_err *e)
{
  const struct csi_lun *l = find_lun (v, e);
  json_t *o;

  if (l == NULL)
    return NULL;
  o = json_pack ("{s:s, s:s}", "type", "iscsi", "url", l->url);
  if (o && l->chap_file
      && json_object_set_new (o, "chap_file", json_string (l->chap_file)))
    json_decref (o), o = NULL;
  return backend_json_dump (o, e);
}
