/* hhc-csi: typed getters for the config file's JSON (csi-json.c).
 * Each returns 0, or -1 with one line "FILE: PATH: message" in the
 * context's err.
 */
#ifndef HHC_CSI_JSON_H
#define HHC_CSI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct csi_conf;

struct ctx { /* where errors go */
  const char *file;
  char *err;
  size_t errlen;
};

int cj_bad (struct ctx *x, const char *path, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* Every key of o is one of keys (NULL-terminated). */
int cj_keys (struct ctx *x, const char *path, json_t *o,
             const char *const *keys);
/* A non-empty string, strdup'd into *out; absent: left alone, or an
 * error when required.
 */
int cj_str (struct ctx *x, const char *path, json_t *o, const char *key,
            bool required, char **out);
/* A size: a positive number or a string such as "64M". */
int cj_size (struct ctx *x, const char *path, json_t *o, const char *key,
             uint64_t dflt, uint64_t *out);
int cj_uint (struct ctx *x, const char *path, json_t *o, const char *key,
             unsigned dflt, unsigned *out);
int cj_bool (struct ctx *x, const char *path, json_t *o, const char *key,
             bool dflt, bool *out);

/* The "node" section (csi-config-node.c); absent: have_node false. */
int load_node (struct ctx *x, json_t *o, struct csi_conf *c);

#endif /* HHC_CSI_JSON_H */
