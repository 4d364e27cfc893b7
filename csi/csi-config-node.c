/* hhc-csi's config file: the "node" section (hhc-csi(8)
 * "CONFIGURATION"): where this node's gateway is, and where a staged
 * volume's cache and log files go.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi.h"
#include "csi-json.h"

/* "nbd": {"address": "127.0.0.1", "port": 10809} or {"socket": PATH};
 * default 127.0.0.1:10809, as hhc-gateway's "listen".
 */
static int
load_nbd (struct ctx *x, json_t *o, struct csi_node_conf *n)
{
  static const char *const keys[] = { "address", "port", "socket", NULL };

  n->nbd_port = 10809;
  if (o == NULL)
    {
      n->nbd_host = strdup ("127.0.0.1");
      return 0;
    }
  if (!json_is_object (o) || cj_keys (x, "node.nbd", o, keys) == -1)
    return json_is_object (o) ? -1
                              : cj_bad (x, "node.nbd", "expected an object");
  if (cj_str (x, "node.nbd", o, "socket", false, &n->nbd_socket) == -1
      || cj_str (x, "node.nbd", o, "address", false, &n->nbd_host) == -1
      || cj_uint (x, "node.nbd", o, "port", 10809, &n->nbd_port) == -1)
    return -1;
  if (n->nbd_socket && (n->nbd_host || json_object_get (o, "port")))
    return cj_bad (x, "node.nbd", "give either socket or address and port");
  if (n->nbd_port > 65535)
    return cj_bad (x, "node.nbd", "port: at most 65535");
  if (n->nbd_socket == NULL && n->nbd_host == NULL)
    n->nbd_host = strdup ("127.0.0.1");
  return 0;
}

static int
load_log_dirs (struct ctx *x, json_t *a, struct csi_node_conf *n)
{
  size_t i;
  json_t *v;

  if (a == NULL)
    return 0;
  if (!json_is_array (a) || json_array_size (a) > CSI_MAX_LOGS)
    return cj_bad (x, "node.log_dirs",
                   "expected an array of at most %d directories", CSI_MAX_LOGS);
  json_array_foreach (a, i, v)
  {
    if (!json_is_string (v) || json_string_length (v) == 0)
      return cj_bad (x, "node.log_dirs", "expected directory names");
    n->log_dirs[n->nlog_dirs++] = strdup (json_string_value (v));
  }
  return 0;
}

static int
check_choice (struct ctx *x, const char *key, const char *v,
              const char *const *choices)
{
  char list[128] = "";

  for (size_t i = 0; choices[i]; i++)
    {
      if (strcmp (v, choices[i]) == 0)
        return 0;
      snprintf (list + strlen (list), sizeof list - strlen (list), "%s%s",
                i ? ", " : "", choices[i]);
    }
  return cj_bad (x, key, "\"%s\": expected one of %s", v, list);
}

int
load_node (struct ctx *x, json_t *o, struct csi_conf *c)
{
  static const char *const keys[]
      = { "gateway_config", "hhcctl",       "nbd",  "cache_dir", "cache_size",
          "log_dirs",       "log_size",     "mode", "state_dir", "attach",
          "max_volumes",    "wait_seconds", NULL };
  static const char *const modes[]
      = { "pt", "wt", "wb", "wbflush", "hhc", NULL };
  static const char *const attach[] = { "auto", "nbd", "nbdfuse", NULL };
  struct csi_node_conf *n = &c->node;

  if (o == NULL)
    return 0;
  if (!json_is_object (o) || cj_keys (x, "node", o, keys) == -1)
    return json_is_object (o) ? -1 : cj_bad (x, "node", "expected an object");
  c->have_node = true;
  if (cj_str (x, "node", o, "gateway_config", true, &n->gateway_config) == -1
      || cj_str (x, "node", o, "hhcctl", false, &n->hhcctl) == -1
      || load_nbd (x, json_object_get (o, "nbd"), n) == -1
      || cj_str (x, "node", o, "cache_dir", true, &n->cache_dir) == -1
      || cj_size (x, "node", o, "cache_size", 1ULL << 30, &n->cache_size) == -1
      || load_log_dirs (x, json_object_get (o, "log_dirs"), n) == -1
      || cj_size (x, "node", o, "log_size", 256ULL << 20, &n->log_size) == -1
      || cj_str (x, "node", o, "mode", false, &n->mode) == -1
      || cj_str (x, "node", o, "state_dir", true, &n->state_dir) == -1
      || cj_str (x, "node", o, "attach", false, &n->attach) == -1
      || cj_uint (x, "node", o, "max_volumes", 16, &n->max_volumes) == -1
      || cj_uint (x, "node", o, "wait_seconds", 120, &n->wait_s) == -1)
    return -1;
  if (n->hhcctl == NULL)
    n->hhcctl = strdup ("hhcctl");
  if (n->mode == NULL)
    n->mode = strdup (n->nlog_dirs ? "hhc" : "wb");
  if (n->attach == NULL)
    n->attach = strdup ("auto");
  if (check_choice (x, "node.mode", n->mode, modes) == -1
      || check_choice (x, "node.attach", n->attach, attach) == -1)
    return -1;
  if (strcmp (n->mode, "hhc") == 0 && n->nlog_dirs == 0)
    return cj_bad (x, "node.mode", "\"hhc\" needs log_dirs (the HDD logs)");
  return 0;
}
