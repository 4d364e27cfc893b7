/* hhc-gateway.json's validation helpers (config-int.h): the context,
 * the cursor and its messages, typed members (sizes in common/parse.h's
 * syntax, as the filter and the plugins read them) and the checks of
 * devices and files.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-int.h"
#include "parse.h"

/* ------------------------------------------------------------------ */
/* Validation context, cursors and messages. */

/* Write the one error line; returns -1. */
int
cfg_fail (struct ctx *c, const struct at *a, bool at_key, const char *fmt, ...)
{
  char msg[512];
  const char *sep = a->path[0] ? ": " : "";
  const struct pnode *n;
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  if (c->errlen == 0)
    return -1;
  if (a->node >= c->t.len)
    {
      snprintf (c->err, c->errlen, "%s: %s%s%s", c->file, a->path, sep, msg);
      return -1;
    }
  n = &c->t.ptr[a->node];
  snprintf (c->err, c->errlen, "%s:%u:%u: %s%s%s", c->file,
            at_key && n->key ? n->kline : n->line,
            at_key && n->key ? n->kcol : n->col, a->path, sep, msg);
  return -1;
}

int
cfg_oom (struct ctx *c, const struct at *a)
{
  return cfg_fail (c, a, false, "out of memory");
}

void
cfg_set_at (struct at *out, json_t *v, size_t node, const char *fmt, ...)
{
  va_list ap;

  out->v = v;
  out->node = node;
  va_start (ap, fmt);
  vsnprintf (out->path, sizeof out->path, fmt, ap);
  va_end (ap);
}

/* The member key of object o into *out: false if there is none. */
bool
cfg_member (const struct ctx *c, const struct at *o, const char *key,
            struct at *out)
{
  const char *k;
  json_t *v;
  size_t i = 0;

  json_object_foreach (o->v, k, v)
  {
    if (strcmp (k, key) == 0)
      {
        cfg_set_at (out, v, ptree_child (&c->t, o->node, i), "%s%s%s", o->path,
                    o->path[0] ? "." : "", key);
        return true;
      }
    i++;
  }
  return false;
}

/* Element i of array a into *out. */
void
cfg_element (const struct ctx *c, const struct at *a, size_t i, struct at *out)
{
  cfg_set_at (out, json_array_get (a->v, i), ptree_child (&c->t, a->node, i),
              "%s[%zu]", a->path, i);
}

int
cfg_missing (struct ctx *c, const struct at *o, const char *key)
{
  struct at a;

  cfg_set_at (&a, NULL, o->node, "%s%s%s", o->path, o->path[0] ? "." : "", key);
  return cfg_fail (c, &a, false, "required key missing");
}

bool
cfg_in_list (const char *s, const char *const *list)
{
  for (; *list; list++)
    if (strcmp (s, *list) == 0)
      return true;
  return false;
}

/* Every key of object o is in allowed (NULL-terminated). */
int
cfg_check_keys (struct ctx *c, const struct at *o, const char *const *allowed)
{
  const char *k;
  json_t *v;
  size_t i = 0;
  struct at a;

  json_object_foreach (o->v, k, v)
  {
    if (!cfg_in_list (k, allowed))
      {
        cfg_set_at (&a, v, ptree_child (&c->t, o->node, i), "%s%s%s", o->path,
                    o->path[0] ? "." : "", k);
        return cfg_fail (c, &a, true, "unknown key");
      }
    i++;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Typed members: 1 if there, 0 if absent (and not required), -1 on an
 * error (reported).  *a, if not NULL, is left at the value.
 */

/* A copy of s into *dst (which must be NULL). */
int
cfg_copy (struct ctx *c, const struct at *a, const char *s, char **dst)
{
  *dst = strdup (s);
  return *dst ? 0 : cfg_oom (c, a);
}

/* String value a: non-empty, no control characters. */
int
cfg_check_string (struct ctx *c, const struct at *a)
{
  const char *s;

  if (!json_is_string (a->v))
    return cfg_fail (c, a, false, "must be a string");
  s = json_string_value (a->v);
  if (*s == '\0')
    return cfg_fail (c, a, false, "must not be empty");
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return cfg_fail (c, a, false, "must not contain control characters");
  return 0;
}

int
cfg_get_string (struct ctx *c, const struct at *o, const char *key,
                bool required, char **dst, struct at *a)
{
  struct at tmp;

  if (a == NULL)
    a = &tmp;
  if (!cfg_member (c, o, key, a))
    return required ? cfg_missing (c, o, key) : 0;
  if (cfg_check_string (c, a) == -1
      || cfg_copy (c, a, json_string_value (a->v), dst) == -1)
    return -1;
  return 1;
}

int
cfg_get_uint (struct ctx *c, const struct at *o, const char *key, unsigned lo,
              unsigned hi, unsigned *dst, struct at *a)
{
  struct at tmp;
  json_int_t n;

  if (a == NULL)
    a = &tmp;
  if (!cfg_member (c, o, key, a))
    return 0;
  n = json_is_integer (a->v) ? json_integer_value (a->v) : -1;
  if (n < lo || n > hi)
    return cfg_fail (c, a, false, "must be an integer from %u to %u", lo, hi);
  *dst = n;
  return 1;
}

int
cfg_get_bool (struct ctx *c, const struct at *o, const char *key, bool *dst)
{
  struct at a;

  if (!cfg_member (c, o, key, &a))
    return 0;
  if (!json_is_boolean (a.v))
    return cfg_fail (c, &a, false, "must be true or false");
  *dst = json_is_true (a.v);
  return 1;
}

int
cfg_get_object (struct ctx *c, const struct at *o, const char *key,
                bool required, struct at *a)
{
  if (!cfg_member (c, o, key, a))
    return required ? cfg_missing (c, o, key) : 0;
  if (!json_is_object (a->v))
    return cfg_fail (c, a, false, "must be an object");
  return 1;
}

/* Value a as a size (a size string or an integer) into *bytes and, as
 * text, into *text (if not NULL).
 */
int
cfg_size_value (struct ctx *c, const struct at *a, uint64_t *bytes, char **text)
{
  char buf[32];

  if (json_is_integer (a->v) && json_integer_value (a->v) >= 0)
    {
      snprintf (buf, sizeof buf, "%" JSON_INTEGER_FORMAT,
                json_integer_value (a->v));
      *bytes = json_integer_value (a->v);
    }
  else if (!json_is_string (a->v)
           || hhc_parse_size (json_string_value (a->v), bytes) != NULL)
    return cfg_fail (c, a, false, "must be a size: %s", CFG_SIZE_SYNTAX);
  return text ? cfg_copy (
             c, a, json_is_string (a->v) ? json_string_value (a->v) : buf, text)
              : 0;
}

/* A size member of at least min (min_text in messages). */
int
cfg_get_size (struct ctx *c, const struct at *o, const char *key, uint64_t min,
              const char *min_text, char **dst, struct at *a)
{
  uint64_t n;

  if (!cfg_member (c, o, key, a))
    return 0;
  if (cfg_size_value (c, a, &n, dst) == -1)
    return -1;
  if (n < min)
    return cfg_fail (c, a, false, "must be at least %s", min_text);
  return 1;
}

/* ------------------------------------------------------------------ */
/* Devices and files. */

/* With check_paths: path (the value of a) exists, and is a directory
 * or is not one, as dir says.
 */
int
cfg_must_exist (struct ctx *c, const struct at *a, const char *path, bool dir)
{
  struct stat st;

  if (!c->check_paths)
    return 0;
  if (stat (path, &st) == -1)
    return cfg_fail (c, a, false, "\"%s\": %s", path, strerror (errno));
  if (dir && !S_ISDIR (st.st_mode))
    return cfg_fail (c, a, false, "\"%s\": %s", path, strerror (ENOTDIR));
  if (!dir && S_ISDIR (st.st_mode))
    return cfg_fail (c, a, false, "\"%s\": %s", path, strerror (EISDIR));
  return 0;
}

/* With check_paths: path exists (not as a directory) or, if it may be
 * created, at least its directory does.
 */
int
cfg_may_create (struct ctx *c, const struct at *a, const char *path,
                bool create)
{
  HHC_CLEANUP_FREE char *dir = NULL;
  struct stat st;
  char *slash;

  if (!c->check_paths || !create || stat (path, &st) == 0 || errno != ENOENT)
    return cfg_must_exist (c, a, path, false);
  if (cfg_copy (c, a, path, &dir) == -1)
    return -1;
  slash = strrchr (dir, '/');
  if (slash == NULL)
    strcpy (dir, ".");
  else
    slash[slash == dir] = '\0';
  if (stat (dir, &st) == -1)
    return cfg_fail (c, a, false, "\"%s\": directory \"%s\": %s", path, dir,
                     strerror (errno));
  if (!S_ISDIR (st.st_mode))
    return cfg_fail (c, a, false, "\"%s\": directory \"%s\": %s", path, dir,
                     strerror (ENOTDIR));
  return 0;
}

/* Volume vol uses path (the value of a) as role: no other cache, log
 * or file backend may be the same file.
 */
int
cfg_claim (struct ctx *c, const struct at *a, const char *path, size_t vol,
           const char *role)
{
  struct claim cl
      = { .canon = realpath (path, NULL), .vol = vol, .role = role };

  if (cl.canon == NULL && cfg_copy (c, a, path, &cl.canon) == -1)
    return -1;
  for (size_t i = 0; i < c->claims.len; i++)
    if (strcmp (c->claims.ptr[i].canon, cl.canon) == 0)
      {
        free (cl.canon);
        return cfg_fail (c, a, false, "\"%s\" is also %s of volume \"%s\"",
                         path, c->claims.ptr[i].role,
                         c->cfg->volumes[c->claims.ptr[i].vol].name);
      }
  if (claims_append (&c->claims, cl) != 0)
    {
      free (cl.canon);
      return cfg_oom (c, a);
    }
  return 0;
}
