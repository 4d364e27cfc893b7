/* hhc-csi's config file (hhc-csi(8) "CONFIGURATION"): JSON, read once
 * at start.  Every key is checked; an unknown one is an error, so a
 * misspelt key is not silently a default.  Errors are one line:
 *
 *   /etc/hhc/csi.json: node.cache_size: "1Q" is not a size
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "csi.h"
#include "csi-json.h"

static int
load_luns (struct ctx *x, const char *path, json_t *luns, struct csi_backend *b)
{
  static const char *const keys[] = { "url", "chap_file", NULL };
  const char *name;
  json_t *l;
  char p[128];

  if (!json_is_object (luns) || json_object_size (luns) == 0)
    return cj_bad (x, path, "luns: expected an object of LUNs by name");
  json_object_foreach (luns, name, l)
  {
    struct csi_lun *lun = &b->luns[b->nluns];

    snprintf (p, sizeof p, "%s.luns.%s", path, name);
    if (b->nluns == CSI_MAX_LUNS)
      return cj_bad (x, p, "more than %d LUNs", CSI_MAX_LUNS);
    if (!csi_name_valid (name))
      return cj_bad (x, p, "a LUN's name is [A-Za-z0-9._-]{1,%d}",
                     CSI_NAME_MAX);
    if (!json_is_object (l) || cj_keys (x, p, l, keys) == -1)
      return json_is_object (l) ? -1 : cj_bad (x, p, "expected an object");
    b->nluns++;
    lun->name = strdup (name);
    if (cj_str (x, p, l, "url", true, &lun->url) == -1
        || cj_str (x, p, l, "chap_file", false, &lun->chap_file) == -1)
      return -1;
    if (strncmp (lun->url, "iscsi://", 8) != 0)
      return cj_bad (x, p, "url: expected iscsi://HOST[:PORT]/IQN/LUN");
  }
  return 0;
}

/* claims_dir (required: no claim, no fencing) and the LUNs. */
static int
load_iscsi (struct ctx *x, const char *path, json_t *o, struct csi_backend *b)
{
  if (json_object_get (o, "claims_dir") == NULL)
    {
      snprintf (x->err, x->errlen,
                "%s: %s.claims_dir is missing: iSCSI LUNs are fenced by "
                "claim files in a directory every node shares",
                x->file, path);
      return -1;
    }
  if (cj_str (x, path, o, "claims_dir", true, &b->claims_dir) == -1)
    return -1;
  return load_luns (x, path, json_object_get (o, "luns"), b);
}

static int
load_backend (struct ctx *x, const char *name, json_t *o, struct csi_backend *b)
{
  static const char *const keys[]
      = { "type",   "dir",        "max_size",   "endpoint", "bucket",
          "region", "prefix",     "tls_verify", "ca_file",  "object_size",
          "luns",   "claims_dir", NULL };
  char path[64], *type = NULL;
  int r = -1;

  snprintf (path, sizeof path, "backends.%s", name);
  if (!csi_backend_name_valid (name))
    return cj_bad (x, path, "a backend's name is [a-z0-9-]{1,16}");
  if (!json_is_object (o))
    return cj_bad (x, path, "expected an object");
  b->name = strdup (name);
  if (cj_keys (x, path, o, keys) == -1
      || cj_str (x, path, o, "type", true, &type) == -1
      || cj_size (x, path, o, "max_size", 0, &b->max_size) == -1)
    goto out;
  if (strcmp (type, "file") == 0)
    {
      b->type = CSI_FILE;
      r = cj_str (x, path, o, "dir", true, &b->dir);
    }
  else if (strcmp (type, "cos") == 0)
    {
      b->type = CSI_COS;
      r = cj_str (x, path, o, "endpoint", true, &b->endpoint) == -1
                  || cj_str (x, path, o, "bucket", true, &b->bucket) == -1
                  || cj_str (x, path, o, "region", false, &b->region) == -1
                  || cj_str (x, path, o, "prefix", false, &b->prefix) == -1
                  || cj_str (x, path, o, "ca_file", false, &b->ca_file) == -1
                  || cj_bool (x, path, o, "tls_verify", true, &b->tls_verify)
                         == -1
                  || cj_size (x, path, o, "object_size", 0, &b->object_size)
                         == -1
              ? -1
              : 0;
    }
  else if (strcmp (type, "iscsi") == 0)
    {
      b->type = CSI_ISCSI;
      r = load_iscsi (x, path, o, b);
    }
  else
    r = cj_bad (x, path, "type: \"%s\": expected file, cos or iscsi", type);
out:
  free (type);
  return r;
}

static int
load_backends (struct ctx *x, json_t *o, struct csi_conf *c)
{
  const char *name;
  json_t *b;

  if (o == NULL)
    return 0;
  if (!json_is_object (o))
    return cj_bad (x, "backends", "expected an object of backends by name");
  json_object_foreach (o, name, b)
  {
    if (c->nbackends == CSI_MAX_BACKENDS)
      return cj_bad (x, "backends", "more than %d backends", CSI_MAX_BACKENDS);
    if (load_backend (x, name, b, &c->backends[c->nbackends++]) == -1)
      return -1;
  }
  return 0;
}

int
csi_conf_load (const char *file, struct csi_conf *c, char *err, size_t errlen)
{
  static const char *const keys[] = { "backends", "node", NULL };
  struct ctx x = { file, err, errlen };
  json_error_t je;
  json_t *root;
  int r = -1;

  memset (c, 0, sizeof *c);
  c->file = strdup (file);
  root = json_load_file (file, JSON_REJECT_DUPLICATES, &je);
  if (root == NULL)
    {
      if (je.line > 0)
        snprintf (err, errlen, "%s:%d:%d: %s", file, je.line, je.column,
                  je.text);
      else
        snprintf (err, errlen, "%s: %s", file, je.text);
      return -1;
    }
  if (!json_is_object (root))
    cj_bad (&x, "(top)", "expected an object");
  else if (cj_keys (&x, "(top)", root, keys) == 0
           && load_backends (&x, json_object_get (root, "backends"), c) == 0
           && load_node (&x, json_object_get (root, "node"), c) == 0)
    r = 0;
  json_decref (root);
  if (r == -1)
    csi_conf_free (c);
  return r;
}

static void
free_backend (struct csi_backend *b)
{
  free (b->name);
  free (b->dir);
  free (b->endpoint);
  free (b->bucket);
  free (b->region);
  free (b->prefix);
  free (b->ca_file);
  free (b->claims_dir);
  for (unsigned i = 0; i < b->nluns; i++)
    {
      free (b->luns[i].name);
      free (b->luns[i].url);
      free (b->luns[i].chap_file);
    }
}

void
csi_conf_free (struct csi_conf *c)
{
  struct csi_node_conf *n = &c->node;

  for (unsigned i = 0; i < c->nbackends; i++)
    free_backend (&c->backends[i]);
  free (n->gateway_config);
  free (n->hhcctl);
  free (n->nbd_host);
  free (n->nbd_socket);
  free (n->cache_dir);
  for (unsigned i = 0; i < n->nlog_dirs; i++)
    free (n->log_dirs[i]);
  free (n->mode);
  free (n->state_dir);
  free (n->attach);
  free (c->file);
  memset (c, 0, sizeof *c);
}

const struct csi_backend *
csi_conf_backend (const struct csi_conf *c, const char *name)
{
  for (unsigned i = 0; i < c->nbackends; i++)
    if (strcmp (c->backends[i].name, name) == 0)
      return &c->backends[i];
  return NULL;
}
