/* appliance/config.c's internals, shared by the files that validate
 * hhc-gateway.json: the validation context, the cursor (struct at:
 * a value, its position node and its path) and the typed getters
 * (config-value.c), and the parts of the configuration each file
 * reads (config-global.c, config-volume.c, config-backend.c,
 * config-tuning.c).  config.c has the file's keys and rules.
 *
 * Every cfg_ function that validates returns 0 (or 1: the member is
 * there) or -1 after writing the one error line (cfg_fail).
 */
#ifndef HHC_APPLIANCE_CONFIG_INT_H
#define HHC_APPLIANCE_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <jansson.h>

#include "arith.h"
#include "cleanup.h"
#include "vector.h"
#include "config-scan.h"
#include "gwconfig.h"

#define PATH_LEN 256 /* longest PATH in a message */
#define SUN_PATH_MAX (sizeof ((struct sockaddr_un *)0)->sun_path - 1)

/* A cache, log or file backend already claimed by a volume. */
struct claim {
  char *canon; /* realpath () of it, or the path as written */
  size_t vol;
  const char *role; /* "the cache", "a log", "the backend" */
};

HHC_VECTOR (claims, struct claim)

struct ctx {
  const char *file;
  char *err;
  size_t errlen;
  bool check_paths;
  struct ptree t;
  struct claims claims;
  struct gw_config *cfg;               /* being filled */
  const struct gw_extra_volume *extra; /* gw_config_load_extra's, or NULL */
  /* config-encryption.c: nbdkit's luks filter found (1), not (-1), not
   * asked yet (0); what is missing.
   */
  int luks_filter;
  char luks_why[4200];
};

/* A value being validated: its position node and its path. */
struct at {
  json_t *v;
  size_t node;
  char path[PATH_LEN];
};

/* ---- config.c: reading files ---- */

/* The whole of file into *text (*len bytes, malloc'd); errno on failure. */
int cfg_read_file (const char *file, char **text, size_t *len);
/* jansson refused text (je): the error line, naming c->file; -1. */
int cfg_syntax_error (struct ctx *c, const char *text, size_t len,
                      const json_error_t *je);

/* ---- config-value.c: the cursor and messages ---- */

/* Write the one error line; returns -1. */
int cfg_fail (struct ctx *c, const struct at *a, bool at_key, const char *fmt,
              ...) __attribute__ ((format (printf, 4, 5)));
/* "out of memory" at a; returns -1. */
int cfg_oom (struct ctx *c, const struct at *a);
/* Point out at value v (node) with a path made from fmt. */
void cfg_set_at (struct at *out, json_t *v, size_t node, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
/* The member key of object o into *out: false if there is none. */
bool cfg_member (const struct ctx *c, const struct at *o, const char *key,
                 struct at *out);
/* Element i of array a into *out. */
void cfg_element (const struct ctx *c, const struct at *a, size_t i,
                  struct at *out);
/* "required key missing": key of object o. */
int cfg_missing (struct ctx *c, const struct at *o, const char *key);
/* s is one of list (NULL-terminated). */
bool cfg_in_list (const char *s, const char *const *list);
/* Every key of object o is in allowed (NULL-terminated). */
int cfg_check_keys (struct ctx *c, const struct at *o,
                    const char *const *allowed);

/* ---- config-value.c: typed members ----
 * 1 if there, 0 if absent (and not required), -1 on an error
 * (reported).  *a, if not NULL, is left at the value.
 */

/* A copy of s into *dst (which must be NULL). */
int cfg_copy (struct ctx *c, const struct at *a, const char *s, char **dst);
/* String value a: non-empty, no control characters. */
int cfg_check_string (struct ctx *c, const struct at *a);
int cfg_get_string (struct ctx *c, const struct at *o, const char *key,
                    bool required, char **dst, struct at *a);
int cfg_get_uint (struct ctx *c, const struct at *o, const char *key,
                  unsigned lo, unsigned hi, unsigned *dst, struct at *a);
int cfg_get_bool (struct ctx *c, const struct at *o, const char *key,
                  bool *dst);
int cfg_get_object (struct ctx *c, const struct at *o, const char *key,
                    bool required, struct at *a);
/* What a size may be, in messages (common/parse.h's syntax, the
 * filter's and the plugins').
 */
#define CFG_SIZE_SYNTAX                                                        \
  "digits with an optional b, s, K, M, G, T, P or E (64M, 64MB and 64MiB "     \
  "are the same)"
/* Value a as a size (a size string or an integer) into *bytes and, as
 * text, into *text (if not NULL).
 */
int cfg_size_value (struct ctx *c, const struct at *a, uint64_t *bytes,
                    char **text);
/* A size member of at least min (min_text in messages). */
int cfg_get_size (struct ctx *c, const struct at *o, const char *key,
                  uint64_t min, const char *min_text, char **dst, struct at *a);

/* ---- config-value.c: devices and files ---- */

/* With check_paths: path (the value of a) exists, and is a directory
 * or is not one, as dir says.
 */
int cfg_must_exist (struct ctx *c, const struct at *a, const char *path,
                    bool dir);
/* With check_paths: path exists (not as a directory) or, if it may be
 * created, at least its directory does.
 */
int cfg_may_create (struct ctx *c, const struct at *a, const char *path,
                    bool create);
/* Volume vol uses path (the value of a) as role: no other cache, log
 * or file backend may be the same file.
 */
int cfg_claim (struct ctx *c, const struct at *a, const char *path, size_t vol,
               const char *role);

/* ---- the parts of the configuration ---- */

/* config-global.c: the gateway's own keys, in order: listen, tls,
 * nbdkit, filter, plugin_dir, run_dir, metrics, restart.
 */
int cfg_parse_globals (struct ctx *c, const struct at *root,
                       struct gw_config *cfg);
/* config-global.c: s is 1 to max of [A-Za-z0-9] and extra. */
bool cfg_is_name (const char *s, const char *extra, size_t max);
/* config-volume.c: "volumes": [ at least one ] (or none, with
 * volumes_dir).
 */
int cfg_parse_volumes (struct ctx *c, const struct at *root,
                       struct gw_config *cfg);
/* config-volume.c: volume object vo into c->cfg->volumes[i]. */
int cfg_parse_volume (struct ctx *c, const struct at *vo, size_t i);
/* config-voldir.c: "volumes_dir": a directory, or one that may be
 * made (its parent exists).
 */
int cfg_parse_voldir_key (struct ctx *c, const struct at *root,
                          struct gw_config *cfg);
/* config-voldir.c: the volumes of cfg->volumes_dir (and c->extra),
 * appended to c->cfg->volumes.
 */
int cfg_read_voldir (struct ctx *c);
/* config-backend.c: volume i's "backend": {"type": ..., its keys}. */
int cfg_parse_backend (struct ctx *c, const struct at *vo, size_t i,
                       struct gw_volume *v);
/* config-encryption.c: "encryption": {"passphrase_file": FILE}. */
int cfg_parse_encryption (struct ctx *c, const struct at *vo,
                          struct gw_volume *v);
/* config-tuning.c: "tuning": {"block-size": "4K", ...}. */
int cfg_parse_tuning (struct ctx *c, const struct at *vo, struct gw_volume *v);

#endif /* HHC_APPLIANCE_CONFIG_INT_H */
