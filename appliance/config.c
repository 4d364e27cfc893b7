/* appliance/config.c: hhc-gateway.json(5), read with jansson and
 * validated before anything starts.  The first error found ends the
 * parse, as one line "FILE:LINE:COL: PATH: message" where PATH names
 * the value (volumes[1].backend.path) and LINE:COL (1-based, the
 * column counts bytes) is where the offending value starts; for an
 * unknown or duplicate key it is where the key starts, for a missing
 * key where the object that lacks it starts.
 *
 * Design.  jansson keeps no positions, so after it has accepted the
 * text a small scanner (scan_*) walks the text again and builds a
 * position tree: one node per JSON value, its children in document
 * order.  jansson iterates an object's members in insertion order,
 * which is document order once duplicates are refused, so the n-th
 * member jansson yields is the n-th child node: the validator walks
 * both trees together in a cursor (struct at: the value, its node and
 * its path).  A duplicate key makes jansson fail; the scanner then
 * runs again and stops at the first key it has already seen in the
 * same object, to name its path and position.
 *
 * The keys (S: string, non-empty, no control characters; N: JSON
 * integer; B: true or false; SIZE: a size string in common/parse.h's
 * syntax, the filter's (digits, then optionally b, s, or K to E in
 * either case, powers of 1024, which may be followed by B or iB) or a
 * non-negative integer).
 * Unknown keys are an error at every level.
 *
 *   key                    type      default      rule
 *   listen                 object    127.0.0.1:10809
 *     .address             S         "127.0.0.1"
 *     .port                N         10809        1..65535
 *     .socket              S         -            not with address or
 *                                                 port; < 108 bytes
 *   tls                    object    none         exactly one of:
 *     .certificates        S         -            a directory (*)
 *     .psk_file            S         -            a file (*)
 *   nbdkit                 S         "nbdkit"
 *   filter                 S         "hhc"        a name [A-Za-z0-9_-]
 *                                                 or an absolute path
 *                                                 (exists (*))
 *   plugin_dir             S         none         a directory (*)
 *   run_dir                S         "/run/hhc"
 *   metrics                object,   127.0.0.1:9810  false: none;
 *                          or B                   true: the default
 *     .address             S         "127.0.0.1"
 *     .port                N         9810         1..65535
 *   restart                object
 *     .min_ms              N         500          10..3600000
 *     .max_ms              N         30000        10..3600000, >= min_ms
 *   volumes_dir            S         none         a directory, or one
 *                                                 whose parent exists (*):
 *                                                 DIR/NAME.json holds
 *                                                 volume NAME (below)
 *   volumes                array     required     at least one object
 *                                    (optional    (or none with
 *                                    with         volumes_dir):
 *                                    volumes_dir)
 *     .name                S         required     [A-Za-z0-9._-]{1,64},
 *                                                 unique; run_dir/NAME.sock
 *                                                 < 108 bytes
 *     .backend             object    required
 *       .type              S         required     file nbd cos iscsi
 *       file:  .path       S         required     exists, not a
 *                                                 directory (*)
 *       nbd:   .uri        S         required     nbd:// nbd+unix://
 *                                                 nbds:// nbds+unix://
 *       cos:   .endpoint   S         required     http:// or https://
 *              .bucket     S         required     no '/'
 *              .prefix     S         none         at most 1000 bytes
 *              .region     S         none
 *              .credentials S        required     a file (*)
 *              .size       SIZE      none         > 0, multiple of 512
 *              .tls_verify B         true
 *              .ca_file    S         none         a file (*)
 *       iscsi: .url        S         required     iscsi://..., no '@'
 *              .chap_file  S         none         a file (*)
 *              .initiator  S         none
 *              .sessions   N         4            1..64
 *              .timeout    N         0 (none)     0..86400 seconds
 *     .cache               S         required     exists (*), or its
 *                                                 directory does when
 *                                                 cache_size is given
 *     .cache_size          SIZE      none         >= 64K
 *     .log                 S or array none        1..8 strings; each as
 *                          of S                   cache, with log_size
 *     .log_size            SIZE      none         >= 8M
 *     .mode                S         none         pt wt wb wbflush hhc;
 *                                                 hhc needs a log, a log
 *                                                 needs hhc (the filter's
 *                                                 default: hhc with a
 *                                                 log, else wb)
 *     .backend_id          S         none
 *     .drain_on_stop       B         false
 *     .encryption          object    none         nbdkit's luks filter
 *                                                 above hhc; installed (*)
 *       .passphrase_file   S         required     an absolute path; a
 *                                                 regular, non-empty,
 *                                                 readable file, mode
 *                                                 o-rwx (*)
 *     .tuning              object    none         filter parameters:
 *       block-size         SIZE      (4K)         power of 2, 512..1M
 *       segment-size       SIZE      (1M-4M)      power of 2, 64K..64M
 *       log-buffers        N or S    (4)          2..64
 *       dirty-low          N or S    (20)         0..100, <= dirty-high
 *       dirty-high         N or S    (60)         0..100, <= dirty-max
 *       dirty-max          N or S    (95)         1..100
 *       hot-ratio          N or S    (2)          1..16, "N" or "N:1"
 *       writeback-threads  N or S    (4)          1..64
 *       idle-ms            N or S    (1000)       0..3600000
 *       format             S         (auto)       auto force never
 *       direct             B or S    (false)      true/false/yes/no/on/
 *                                                 off/1/0
 *       ssd-sync           S         (flush)      flush checkpoint
 *       log-lost           S         (refuse)     refuse accept
 *       seq-cutoff         SIZE      (0: off)     any size
 *
 * (*) only when check_paths.  A whole-number string may end in '%'
 * (as the filter allows).  No device or file may serve twice: every
 * cache, log and file backend of every volume must differ from all the
 * others (compared after realpath () where the path exists, else as
 * written).
 *
 * A file DIR/NAME.json of volumes_dir (NAME not starting with '.')
 * holds one object with a volume's keys, "name" equal to NAME; its
 * errors name that file.  The directory's volumes follow the main
 * file's, in name order, under the same rules (names, caches and logs
 * unique across all of them).  A missing directory holds none.
 *
 * Files: config.c (this table, the entry points), config-scan.c (the
 * position scanner), config-value.c (the cursor, messages and typed
 * members), config-global.c, config-volume.c, config-backend.c and
 * config-tuning.c and config-encryption.c (the keys), config-voldir.c (volumes_dir),
 * config-file.c (reading a file, jansson's syntax errors),
 * config-int.h (what they share).
 *
 * Nothing here is shared between threads.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-int.h"

static int
parse_root (struct ctx *c, json_t *root, struct gw_config *cfg)
{
  static const char *const keys[]
      = { "listen",     "tls",         "nbdkit",  "filter",
          "plugin_dir", "run_dir",     "metrics", "restart",
          "volumes",    "volumes_dir", NULL };
  struct at r = { .v = root, .node = 0 };

  if (!json_is_object (root))
    return cfg_fail (c, &r, false, "the configuration must be a JSON object");
  if (cfg_check_keys (c, &r, keys) == -1 || cfg_parse_globals (c, &r, cfg) == -1
      || cfg_parse_voldir_key (c, &r, cfg) == -1
      || cfg_parse_volumes (c, &r, cfg) == -1)
    return -1;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Entry points. */

static int
parse_buffer (const char *file, const char *text, size_t len,
              const struct gw_extra_volume *extra, bool check_paths,
              struct gw_config *cfg, char *err, size_t errlen)
{
  struct gw_config tmp = { 0 };
  struct ctx c = { .file = file,
                   .extra = extra,
                   .err = err,
                   .errlen = err ? errlen : 0,
                   .check_paths = check_paths,
                   .cfg = &tmp };
  json_error_t je;
  json_t *root;
  int r = -1;

  memset (cfg, 0, sizeof *cfg);
  if (c.errlen)
    err[0] = '\0';
  root = json_loadb (text, len, JSON_REJECT_DUPLICATES, &je);
  if (root == NULL)
    cfg_syntax_error (&c, text, len, &je);
  else
    {
      scan_tree (&c.t, text, len, false);
      tmp.file = strdup (file);
      if (tmp.file == NULL)
        cfg_oom (&c, &(struct at){ .node = NO_NODE });
      else
        r = parse_root (&c, root, &tmp);
      json_decref (root);
      if (r == 0)
        r = cfg_read_voldir (&c);
    }
  for (size_t i = 0; i < c.claims.len; i++)
    free (c.claims.ptr[i].canon);
  claims_reset (&c.claims);
  ptree_reset (&c.t);
  if (r == -1)
    gw_config_free (&tmp);
  else
    *cfg = tmp;
  return r;
}

int
gw_config_parse (const char *file, const char *text, bool check_paths,
                 struct gw_config *cfg, char *err, size_t errlen)
{
  return parse_buffer (file, text, strlen (text), NULL, check_paths, cfg, err,
                       errlen);
}

int
gw_config_load (const char *file, bool check_paths, struct gw_config *cfg,
                char *err, size_t errlen)
{
  return gw_config_load_extra (file, NULL, check_paths, cfg, err, errlen);
}

int
gw_config_load_extra (const char *file, const struct gw_extra_volume *extra,
                      bool check_paths, struct gw_config *cfg, char *err,
                      size_t errlen)
{
  HHC_CLEANUP_FREE char *text = NULL;
  size_t len;
  int e = cfg_read_file (file, &text, &len);

  memset (cfg, 0, sizeof *cfg);
  if (e)
    {
      if (err && errlen)
        snprintf (err, errlen, "%s: %s", file, strerror (e));
      return -1;
    }
  return parse_buffer (file, text ? text : "", len, extra, check_paths, cfg,
                       err, errlen);
}

static void
free_volume (struct gw_volume *v)
{
  char **strings[]
      = { &v->name,        &v->source,    &v->path,       &v->uri,
          &v->endpoint,    &v->bucket,    &v->prefix,     &v->region,
          &v->credentials, &v->size,      &v->ca_file,    &v->url,
          &v->chap_file,   &v->initiator, &v->cache,      &v->cache_size,
          &v->log_size,    &v->mode,      &v->backend_id, &v->passphrase_file };

  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    free (*strings[i]);
  for (unsigned i = 0; i < v->nlogs; i++)
    free (v->logs[i]);
  for (unsigned i = 0; i < v->ntuning; i++)
    {
      free (v->tuning[i].key);
      free (v->tuning[i].value);
    }
}

void
gw_config_free (struct gw_config *cfg)
{
  char **strings[] = { &cfg->file,          &cfg->listen_address,
                       &cfg->listen_socket, &cfg->tls_certificates,
                       &cfg->tls_psk_file,  &cfg->nbdkit,
                       &cfg->filter,        &cfg->plugin_dir,
                       &cfg->run_dir,       &cfg->metrics_address,
                       &cfg->volumes_dir };

  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    free (*strings[i]);
  for (size_t i = 0; i < cfg->nvolumes; i++)
    free_volume (&cfg->volumes[i]);
  free (cfg->volumes);
  memset (cfg, 0, sizeof *cfg);
}

const struct gw_volume *
gw_config_find (const struct gw_config *cfg, const char *name)
{
  for (size_t i = 0; i < cfg->nvolumes; i++)
    if (cfg->volumes[i].name && strcmp (cfg->volumes[i].name, name) == 0)
      return &cfg->volumes[i];
  return NULL;
}

/* Both NULL, or equal strings. */
static bool
str_eq (const char *a, const char *b)
{
  return a == b || (a && b && strcmp (a, b) == 0);
}

bool
gw_volume_equal (const struct gw_volume *a, const struct gw_volume *b)
{
  const char *const sa[] = {
    a->name,     a->path,      a->uri,         a->endpoint,       a->bucket,
    a->prefix,   a->region,    a->credentials, a->size,           a->ca_file,
    a->url,      a->chap_file, a->initiator,   a->cache,          a->cache_size,
    a->log_size, a->mode,      a->backend_id,  a->passphrase_file
  };
  const char *const sb[] = {
    b->name,     b->path,      b->uri,         b->endpoint,       b->bucket,
    b->prefix,   b->region,    b->credentials, b->size,           b->ca_file,
    b->url,      b->chap_file, b->initiator,   b->cache,          b->cache_size,
    b->log_size, b->mode,      b->backend_id,  b->passphrase_file
  };

  if (a->type != b->type || a->tls_verify != b->tls_verify
      || a->drain_on_stop != b->drain_on_stop || a->nlogs != b->nlogs
      || a->ntuning != b->ntuning || a->sessions != b->sessions
      || a->timeout != b->timeout)
    return false;
  for (size_t i = 0; i < sizeof sa / sizeof sa[0]; i++)
    if (!str_eq (sa[i], sb[i]))
      return false;
  for (unsigned i = 0; i < a->nlogs; i++)
    if (!str_eq (a->logs[i], b->logs[i]))
      return false;
  for (unsigned i = 0; i < a->ntuning; i++)
    if (!str_eq (a->tuning[i].key, b->tuning[i].key)
        || !str_eq (a->tuning[i].value, b->tuning[i].value))
      return false;
  return true;
}

const char *
gw_backend_type_to_string (enum gw_backend_type t)
{
  switch (t)
    {
    case GW_BACKEND_FILE:
      return "file";
    case GW_BACKEND_NBD:
      return "nbd";
    case GW_BACKEND_COS:
      return "cos";
    case GW_BACKEND_ISCSI:
      return "iscsi";
    }
  return "unknown";
}
