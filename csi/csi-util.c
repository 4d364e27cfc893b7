/* hhc-csi: errors, maps, volume ids, parameters and messages (csi.h). */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "csi.h"
#include "parse.h"

int
csi_fail (struct csi_err *e, enum csi_code code, const char *fmt, ...)
{
  va_list ap;

  e->code = code;
  va_start (ap, fmt);
  vsnprintf (e->msg, sizeof e->msg, fmt, ap);
  va_end (ap);
  return -1;
}

void
csi_log (const char *fmt, ...)
{
  va_list ap;
  char line[1024];

  va_start (ap, fmt);
  vsnprintf (line, sizeof line, fmt, ap);
  va_end (ap);
  fprintf (stderr, "hhc-csi: %s\n", line);
}

const char *
csi_map_get (const struct csi_map *m, const char *key)
{
  for (size_t i = 0; m && i < m->n; i++)
    if (strcmp (m->kv[i].key, key) == 0)
      return m->kv[i].value;
  return NULL;
}

int
csi_parse_size (const char *s, uint64_t *out)
{
  return s && hhc_parse_size (s, out) == NULL ? 0 : -1;
}

static bool
all_of (const char *s, size_t max, const char *extra)
{
  size_t n = strlen (s);

  if (n == 0 || n > max)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')
          || strchr (extra, s[i]) != NULL))
      return false;
  return true;
}

bool
csi_name_valid (const char *name)
{
  return name && all_of (name, CSI_NAME_MAX, "ABCDEFGHIJKLMNOPQRSTUVWXYZ._-");
}

int
csi_volid_parse (const struct csi_conf *c, const char *id, struct csi_volid *v,
                 struct csi_err *e)
{
  const char *colon;
  char backend[17];
  size_t blen;

  memset (v, 0, sizeof *v);
  if (id == NULL || *id == '\0')
    return csi_fail (e, CSI_INVALID_ARGUMENT, "volume_id is missing");
  colon = strchr (id, ':');
  blen = colon ? (size_t)(colon - id) : 0;
  if (colon == NULL || blen == 0 || blen >= sizeof backend
      || !csi_name_valid (colon + 1))
    return csi_fail (e, CSI_INVALID_ARGUMENT,
                     "volume_id \"%.80s\": expected BACKEND:NAME", id);
  memcpy (backend, id, blen);
  backend[blen] = '\0';
  v->backend = csi_conf_backend (c, backend);
  if (v->backend == NULL)
    return csi_fail (e, CSI_NOT_FOUND, "volume_id %s: no backend \"%s\" in %s",
                     id, backend, c->file);
  snprintf (v->name, sizeof v->name, "%s", colon + 1);
  snprintf (v->export_name, sizeof v->export_name, "%s.%s", backend, v->name);
  snprintf (v->id, sizeof v->id, "%s:%s", backend, v->name);
  return 0;
}

/* Backend names: [a-z0-9-]{1,16}. */
bool
csi_backend_name_valid (const char *name)
{
  return all_of (name, 16, "-");
}

static const char *const modes[] = { "pt", "wt", "wb", "wbflush", "hhc" };

int
csi_params_parse (const struct csi_map *m, struct csi_params *p,
                  struct csi_err *e)
{
  uint64_t size;

  memset (p, 0, sizeof *p);
  for (size_t i = 0; m && i < m->n; i++)
    {
      const char *k = m->kv[i].key, *val = m->kv[i].value;

      if (strncmp (k, "csi.storage.k8s.io/", 19) == 0)
        continue;
      if (strcmp (k, "backend") == 0)
        p->backend = val;
      else if (strcmp (k, "mode") == 0)
        {
          bool ok = false;
          for (size_t j = 0; j < sizeof modes / sizeof modes[0]; j++)
            ok |= strcmp (val, modes[j]) == 0;
          if (!ok)
            return csi_fail (e, CSI_INVALID_ARGUMENT,
                             "parameter mode=%.32s: expected pt, wt, wb, "
                             "wbflush or hhc",
                             val);
          p->mode = val;
        }
      else if (strcmp (k, "cacheSize") == 0 || strcmp (k, "logSize") == 0)
        {
          if (csi_parse_size (val, &size) == -1 || size == 0)
            return csi_fail (e, CSI_INVALID_ARGUMENT,
                             "parameter %s=%.32s: not a size", k, val);
          *(k[0] == 'c' ? &p->cache_size : &p->log_size) = val;
        }
      else
        return csi_fail (e, CSI_INVALID_ARGUMENT,
                         "unknown parameter \"%.64s\" (known: backend, "
                         "mode, cacheSize, logSize)",
                         k);
    }
  return 0;
}
