/* hhc-csi: the node's gateway, through hhcctl (node.h "node-gateway.c").
 *
 * A staged volume is a run-time volume of the node's hhc-gateway,
 * named by its export (BACKEND.NAME), with its cache CACHE_DIR/EXPORT.cache
 * and, in mode hhc, a log DIR/EXPORT.log in each log directory.  hhcctl
 * volume add takes the object on stdin (so no credential path or
 * backend detail is on a command line) and is idempotent; hhcctl
 * volume remove --drain writes every dirty block back and flushes the
 * backend before it removes the volume, and exits 1 when that fails.
 */
#include <config.h>

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cleanup.h"
#include "node.h"

static const char *
hhcctl_prog (const struct csi_node_conf *n)
{
  return n->hhcctl ? n->hhcctl : "hhcctl";
}

/* hhcctl volume remove [--drain]: exit 1 is a drain that failed. */
int
gateway_remove (const struct csi_node_conf *n, const char *export_name,
                bool drain, struct csi_err *e)
{
  char wait[16];
  snprintf (wait, sizeof wait, "%u", n->wait_s);
  const char *argv[]
      = { hhcctl_prog (n), "volume", "remove",    "--config", n->gateway_config,
          "--wait",        wait,     export_name, NULL,       NULL };
  if (drain) /* before the name */
    {
      argv[8] = argv[7];
      argv[7] = "--drain";
    }
  struct run_res r;
  if (run_prog (argv, NULL, 0, n->wait_s + 60, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", argv[0], strerror (errno));
  if (r.status != 0)
    return csi_fail (e, r.status == 1 ? CSI_FAILED_PRECONDITION : CSI_INTERNAL,
                     "hhcctl volume remove %s: %s", export_name, run_line (&r));
  return 0;
}

/* The volume's cache and log files, once the gateway has let them go:
 * first `hhcctl format` (no --force), which refuses, changing nothing,
 * while they hold anything the backend lacks or while anything has them
 * open; only then are they unlinked.  So a drain that missed a write
 * never costs the write.
 */
int
gateway_remove_files (const struct csi_node_conf *n, const char *export_name,
                      struct csi_err *e)
{
  char paths[CSI_MAX_LOGS + 1][PATH_MAX];
  const char *argv[2 * (CSI_MAX_LOGS + 1) + 3] = { hhcctl_prog (n), "format" };
  size_t argc = 2, nfiles = 0;
  struct run_res r;

  for (unsigned i = 0; i <= n->nlog_dirs; i++)
    {
      char *p = paths[nfiles];
      if (i == 0)
        snprintf (p, PATH_MAX, "%s/%s.cache", n->cache_dir, export_name);
      else
        snprintf (p, PATH_MAX, "%s/%s.log", n->log_dirs[i - 1], export_name);
      if (access (p, F_OK) == -1)
        continue;
      argv[argc++] = i == 0 ? "--cache" : "--log";
      argv[argc++] = p;
      nfiles++;
    }
  if (nfiles == 0)
    return 0;
  if (run_prog (argv, NULL, 0, n->wait_s + 60, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", argv[0], strerror (errno));
  if (r.status != 0)
    return csi_fail (e, CSI_FAILED_PRECONDITION,
                     "%s: the cache or log still holds data the backend "
                     "lacks, or is in use; kept: %s",
                     export_name, run_line (&r));
  for (size_t i = 0; i < nfiles; i++)
    if (unlink (paths[i]) < 0 && errno != ENOENT)
      return csi_fail (e, CSI_INTERNAL, "unlink %s: %s", paths[i],
                       strerror (errno));
  return 0;
}

/* The gateway's volume object (hhc-gateway.json(5) "volumes"). */
static json_t *
volume_json (const struct csi_node_conf *n, const struct gw_vol *s,
             json_t *backend)
{
  const char *name = s->v->export_name;
  char path[PATH_MAX];
  snprintf (path, sizeof path, "%s/%s.cache", n->cache_dir, name);
  json_t *vo = json_pack ("{s:s, s:o, s:s, s:I, s:s}", "name", name, "backend",
                          backend, "cache", path, "cache_size",
                          (json_int_t)s->cache_size, "mode", s->mode);
  if (vo && s->v->backend->type == CSI_FILE) /* no export description */
    json_object_set_new (vo, "backend_id", json_string (s->v->id));
  if (!vo || strcmp (s->mode, "hhc") != 0) /* other modes: no new log */
    return vo;
  json_t *logs = json_array ();
  for (unsigned i = 0; i < n->nlog_dirs; i++)
    {
      snprintf (path, sizeof path, "%s/%s.log", n->log_dirs[i], name);
      json_array_append_new (logs, json_string (path));
    }
  json_object_set_new (vo, "log", logs);
  json_object_set_new (vo, "log_size", json_integer (s->log_size));
  return vo;
}

/* hhcctl volume add: the volume object on stdin. */
int
gateway_add (const struct csi_node_conf *n, const struct gw_vol *s,
             const char *cred, struct csi_err *e)
{
  HHC_CLEANUP_FREE char *btext = backend_gateway_json (s->v, cred, e);
  if (!btext)
    return -1;
  json_t *backend = json_loads (btext, 0, NULL);
  json_t *vo = backend ? volume_json (n, s, backend) : NULL;
  HHC_CLEANUP_FREE char *text = vo ? json_dumps (vo, JSON_COMPACT) : NULL;
  json_decref (vo);
  if (!text)
    return csi_fail (e, CSI_INTERNAL, "volume %s: bad gateway object",
                     s->v->id);
  char wait[16];
  snprintf (wait, sizeof wait, "%u", n->wait_s);
  const char *argv[]
      = { hhcctl_prog (n), "volume", "add", "--config", n->gateway_config,
          "--wait",        wait,     "-",   NULL };
  struct run_res r;
  if (run_prog (argv, text, strlen (text), n->wait_s + 60, &r) < 0)
    return csi_fail (e, CSI_INTERNAL, "%s: %s", argv[0], strerror (errno));
  if (r.status != 0)
    return csi_fail (e, CSI_INTERNAL, "hhcctl volume add %s: %s",
                     s->v->export_name, run_line (&r));
  return 0;
}
