/* hhc-gateway.json: a volume's "tuning", the filter's parameters,
 * checked as the filter checks them (with the filter's parser,
 * common/parse.h).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-int.h"
#include "parse.h"

/* The filter's tuning parameters (nbdkit-hhc-filter/params.c). */
enum tuning_kind {
  T_SIZE,
  T_BYTES,
  T_UINT,
  T_RATIO,
  T_FORMAT,
  T_BOOL,
  T_SSDSYNC,
  T_PROMOTE,
  T_LOGLOST
};

struct tuning_key {
  const char *key;
  enum tuning_kind kind;
  unsigned lo, hi;   /* T_SIZE (a power of two), T_UINT, T_RATIO; T_BYTES:
                      * any size */
  const char *range; /* in messages */
};

static const struct tuning_key tuning_keys[] = {
  { "block-size", T_SIZE, 512, 1 << 20, "a power of two from 512 to 1M" },
  { "segment-size", T_SIZE, 64 << 10, 64 << 20,
    "a power of two from 64K to 64M" },
  { "log-buffers", T_UINT, 2, 64, "a whole number from 2 to 64" },
  { "dirty-low", T_UINT, 0, 100, "a whole number from 0 to 100" },
  { "dirty-high", T_UINT, 0, 100, "a whole number from 0 to 100" },
  { "dirty-max", T_UINT, 1, 100, "a whole number from 1 to 100" },
  { "hot-ratio", T_RATIO, 1, 16, "N or N:1, N from 1 to 16" },
  { "writeback-threads", T_UINT, 1, 64, "a whole number from 1 to 64" },
  { "idle-ms", T_UINT, 0, 3600000, "a whole number from 0 to 3600000" },
  { "format", T_FORMAT, 0, 0, "auto, force or never" },
  { "direct", T_BOOL, 0, 0, "true or false" },
  { "ssd-sync", T_SSDSYNC, 0, 0, "flush or checkpoint" },
  { "seq-cutoff", T_BYTES, 0, 0, "a size (0: off)" },
  { "promote", T_PROMOTE, 0, 0, "always or nhit" },
  { "log-lost", T_LOGLOST, 0, 0, "refuse or accept" },
  { "promote-hits", T_UINT, 1, 255, "a whole number from 1 to 255" },
  { "promote-window", T_UINT, 0, 1000000000,
    "a whole number from 0 to 1000000000" },
  /* Last: the dirty-* checks find their keys by index. */
  { "log-inflight", T_UINT, 1, 16, "a whole number from 1 to 16" },
};
#define NTUNING (sizeof tuning_keys / sizeof tuning_keys[0])

/* The filter's defaults of dirty-low, dirty-high, dirty-max. */
static const unsigned dirty_defaults[3] = { 20, 60, 95 };

/* A whole number string ("60" or "60%"), as the filter reads one. */
static bool
parse_uint (const char *s, uint64_t *out)
{
  unsigned v;

  if (hhc_parse_unsigned (s, "%", &v) != NULL)
    return false;
  *out = v;
  return true;
}

/* Whether text is a valid value of k (n: its number, if it has one). */
static bool
tuning_ok (const struct tuning_key *k, const char *text, uint64_t *n)
{
  static const char *const formats[] = { "auto", "force", "never", NULL };
  static const char *const ssd_syncs[] = { "flush", "checkpoint", NULL };
  static const char *const promotes[] = { "always", "nhit", NULL };
  static const char *const log_losts[] = { "refuse", "accept", NULL };
  char buf[32];
  bool b;
  size_t len = strlen (text);

  switch (k->kind)
    {
    case T_SIZE:
      return hhc_parse_size (text, n) == NULL && *n >= k->lo && *n <= k->hi
             && HHC_IS_POW2 (*n);
    case T_BYTES:
      return hhc_parse_size (text, n) == NULL;
    case T_RATIO:
      if (len >= 2 && len < sizeof buf && strcmp (text + len - 2, ":1") == 0)
        {
          memcpy (buf, text, len - 2);
          buf[len - 2] = '\0';
          text = buf;
        }
      /* fallthrough */
    case T_UINT:
      return parse_uint (text, n) && *n >= k->lo && *n <= k->hi;
    case T_FORMAT:
      return cfg_in_list (text, formats);
    case T_SSDSYNC:
      return cfg_in_list (text, ssd_syncs);
    case T_PROMOTE:
      return cfg_in_list (text, promotes);
    case T_LOGLOST:
      return cfg_in_list (text, log_losts);
    case T_BOOL:
      return hhc_parse_bool (text, &b) == NULL;
    }
  return false;
}

/* Tuning value a of key k, as text into *dst. */
static int
tuning_value (struct ctx *c, const struct at *a, const struct tuning_key *k,
              uint64_t *n, char **dst)
{
  char buf[32];
  const char *text = buf;

  if (json_is_string (a->v))
    text = json_string_value (a->v);
  else if (json_is_integer (a->v) && k->kind != T_FORMAT && k->kind != T_BOOL
           && k->kind != T_SSDSYNC && k->kind != T_PROMOTE
           && k->kind != T_LOGLOST)
    snprintf (buf, sizeof buf, "%" JSON_INTEGER_FORMAT,
              json_integer_value (a->v));
  else if (json_is_boolean (a->v) && k->kind == T_BOOL)
    text = json_is_true (a->v) ? "true" : "false";
  else
    text = NULL;
  if (text == NULL || !tuning_ok (k, text, n))
    return cfg_fail (c, a, false, "must be %s", k->range);
  return cfg_copy (c, a, text, dst);
}

/* dirty-low <= dirty-high <= dirty-max, given or default (at[] the
 * values given, node NO_NODE if not).
 */
static int
check_dirty (struct ctx *c, const struct at at[3], const unsigned val[3])
{
  static const char *const names[] = { "dirty-low", "dirty-high", "dirty-max" };

  for (int j = 0; j < 2; j++)
    {
      if (val[j] <= val[j + 1])
        continue;
      if (at[j].v)
        return cfg_fail (c, &at[j], false, "must not exceed %s (%u)",
                         names[j + 1], val[j + 1]);
      return cfg_fail (c, &at[j + 1], false, "must be at least %s (%u)",
                       names[j], val[j]);
    }
  return 0;
}

/* "tuning": {"block-size": "4K", ...}. */
int
cfg_parse_tuning (struct ctx *c, const struct at *vo, struct gw_volume *v)
{
  struct at o, a, dirty[3] = { { 0 } };
  unsigned dval[3]
      = { dirty_defaults[0], dirty_defaults[1], dirty_defaults[2] };
  const char *key;
  json_t *val;
  size_t i = 0, k;
  uint64_t n = 0;
  int r = cfg_get_object (c, vo, "tuning", false, &o);

  if (r <= 0)
    return r;
  json_object_foreach (o.v, key, val)
  {
    cfg_set_at (&a, val, ptree_child (&c->t, o.node, i++), "%s.%s", o.path,
                key);
    for (k = 0; k < NTUNING && strcmp (key, tuning_keys[k].key); k++)
      ;
    if (k == NTUNING)
      return cfg_fail (c, &a, true, "unknown key (not a tuning parameter)");
    if (v->ntuning == GW_MAX_TUNING)
      return cfg_fail (c, &a, true, "more than %d tuning keys", GW_MAX_TUNING);
    v->tuning[v->ntuning].key = strdup (key);
    if (v->tuning[v->ntuning].key == NULL)
      return cfg_oom (c, &a);
    if (tuning_value (c, &a, &tuning_keys[k], &n,
                      &v->tuning[v->ntuning++].value)
        == -1)
      return -1;
    if (strncmp (key, "dirty-", 6) == 0)
      {
        int d = k - 3; /* dirty-low is tuning_keys[3] */
        dirty[d] = a;
        dval[d] = n;
      }
  }
  return check_dirty (c, dirty, dval);
}
