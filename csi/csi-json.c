/* hhc-csi: the config file's typed getters, each failing with one
 * line "FILE: PATH: what is wrong" (csi-json.h).
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "csi.h"
#include "csi-json.h"

int
cj_bad (struct ctx *x, const char *path, const char *fmt, ...)
{
  char what[256];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (what, sizeof what, fmt, ap);
  va_end (ap);
  snprintf (x->err, x->errlen, "%s: %s: %s", x->file, path, what);
  return -1;
}

/* The keys an object may have, NULL-terminated. */
int
cj_keys (struct ctx *x, const char *path, json_t *o, const char *const *keys)
{
  const char *k;
  json_t *val;

  json_object_foreach (o, k, val)
  {
    size_t i = 0;
    while (keys[i] && strcmp (keys[i], k) != 0)
      i++;
    if (keys[i] == NULL)
      return cj_bad (x, path, "unknown key \"%s\"", k);
  }
  return 0;
}

/* A string member: *out strdup'd, or left NULL when absent and not
 * required.
 */
int
cj_str (struct ctx *x, const char *path, json_t *o, const char *key,
        bool required, char **out)
{
  json_t *v = json_object_get (o, key);

  if (v == NULL)
    return required ? cj_bad (x, path, "\"%s\" is missing", key) : 0;
  if (!json_is_string (v) || json_string_length (v) == 0)
    return cj_bad (x, path, "%s: expected a non-empty string", key);
  *out = strdup (json_string_value (v));
  return *out ? 0 : cj_bad (x, path, "out of memory");
}

int
cj_size (struct ctx *x, const char *path, json_t *o, const char *key,
         uint64_t dflt, uint64_t *out)
{
  json_t *v = json_object_get (o, key);

  *out = dflt;
  if (v == NULL)
    return 0;
  if (json_is_integer (v) && json_integer_value (v) > 0)
    {
      *out = json_integer_value (v);
      return 0;
    }
  if (!json_is_string (v) || csi_parse_size (json_string_value (v), out))
    return cj_bad (x, path, "%s: expected a size such as \"64M\"", key);
  return 0;
}

int
cj_uint (struct ctx *x, const char *path, json_t *o, const char *key,
         unsigned dflt, unsigned *out)
{
  json_t *v = json_object_get (o, key);

  *out = dflt;
  if (v == NULL)
    return 0;
  if (!json_is_integer (v) || json_integer_value (v) <= 0
      || json_integer_value (v) > 1000000)
    return cj_bad (x, path, "%s: expected a positive whole number", key);
  *out = json_integer_value (v);
  return 0;
}

int
cj_bool (struct ctx *x, const char *path, json_t *o, const char *key, bool dflt,
         bool *out)
{
  json_t *v = json_object_get (o, key);

  *out = v ? json_is_true (v) : dflt;
  if (v && !json_is_boolean (v))
    return cj_bad (x, path, "%s: expected true or false", key);
  return 0;
}
