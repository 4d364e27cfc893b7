/* The appliance's configuration file (hhc-gateway.json(5)): parsed
 * with jansson, validated before anything starts.  Every error names
 * the file, line and column of the offending value or key:
 *
 *   /etc/hhc/gateway.json:12:7: volumes[1].cache: "/dev/sdb1" is also
 *   the cache of volume "vm1"
 *
 * The parsed form is plain C strings and numbers; nothing here starts
 * a process or opens a device (but gw_config_load checks that the
 * devices and files named exist, where they must).
 */
#ifndef HHC_APPLIANCE_GWCONFIG_H
#define HHC_APPLIANCE_GWCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define GW_MAX_LOGS 8    /* log devices per volume (the filter's limit) */
#define GW_MAX_TUNING 32 /* tuning keys per volume */

enum gw_backend_type {
  GW_BACKEND_FILE,  /* nbdkit file plugin: path */
  GW_BACKEND_NBD,   /* nbdkit nbd plugin: uri */
  GW_BACKEND_COS,   /* our cos plugin */
  GW_BACKEND_ISCSI, /* our hhciscsi plugin */
};

/* "tuning": { "block-size": "4K", "dirty-high": 60, ... }: filter
 * parameters passed as key=value (numbers are printed as given).
 */
struct gw_kv {
  char *key;
  char *value;
};

struct gw_volume {
  char *name;   /* the NBD export name; [A-Za-z0-9._-]{1,64} */
  char *source; /* the volume file it was read from; NULL: the main file */
  enum gw_backend_type type;
  /* file */
  char *path;
  /* nbd */
  char *uri;
  /* cos */
  char *endpoint, *bucket, *prefix, *region; /* region, prefix optional */
  char *credentials; /* a file: line 1 access key, line 2 secret key */
  char *size;        /* "100G": create the volume if missing (optional) */
  bool tls_verify;   /* default true */
  char *ca_file;     /* optional */
  /* iscsi */
  char *url;         /* iscsi://host[:port]/iqn/lun (no user or password) */
  char *chap_file;   /* optional: line 1 user, line 2 password */
  char *initiator;   /* optional */
  unsigned sessions; /* optional: 0 = the plugin's default (4) */
  int timeout;       /* optional: -1 = the plugin's default */
  /* the cache */
  char *cache;      /* device or file */
  char *cache_size; /* optional: create a missing file of this size */
  char *logs[GW_MAX_LOGS];
  unsigned nlogs;
  char *log_size;   /* optional: create missing log files of this size */
  char *mode;       /* optional: pt wt wb wbflush hhc */
  char *backend_id; /* optional */
  bool drain_on_stop;
  /* "encryption": {"passphrase_file": FILE}: nbdkit's luks filter above
   * hhc, its passphrase read by nbdkit from FILE (NULL: none).
   */
  char *passphrase_file;
  struct gw_kv tuning[GW_MAX_TUNING];
  unsigned ntuning;
};

struct gw_config {
  char *file; /* the path it was read from */
  /* "listen": {"address": "127.0.0.1", "port": 10809} or
   * {"socket": "/run/hhc/nbd.sock"}; default 127.0.0.1:10809.
   */
  char *listen_address; /* NULL when socket */
  unsigned listen_port;
  char *listen_socket; /* NULL when address */
  /* "tls": {"certificates": DIR} or {"psk_file": FILE}; optional. */
  char *tls_certificates, *tls_psk_file;
  char *nbdkit;     /* default "nbdkit" (found on PATH) */
  char *filter;     /* default "hhc" (nbdkit's filterdir) */
  char *plugin_dir; /* optional: where the cos/hhciscsi/route .so are */
  char *run_dir;    /* default "/run/hhc" */
  /* "metrics": {"address": "127.0.0.1", "port": 9810} or false; the
   * default is 127.0.0.1:9810.
   */
  bool metrics;
  char *metrics_address;
  unsigned metrics_port;
  unsigned restart_min_ms, restart_max_ms; /* back-off; 500, 30000 */
  char *volumes_dir; /* optional: one volume per DIR/NAME.json */
  struct gw_volume *volumes;
  size_t nvolumes;
};

/* Read and validate FILE into *cfg.  0 on success; on failure -1 and
 * one line "FILE:LINE:COL: message" in err (NUL-terminated, at most
 * errlen bytes), *cfg left empty.  check_paths: also require that the
 * devices and files named exist (or that their directory does, where a
 * size says they may be created).
 */
int gw_config_load (const char *file, bool check_paths, struct gw_config *cfg,
                    char *err, size_t errlen);

/* A volume file that is not (yet) in volumes_dir: file names it in
 * messages, text (len bytes) is its content.
 */
struct gw_extra_volume {
  const char *file;
  const char *text;
  size_t len;
};

/* gw_config_load, then extra as if it were volumes_dir/NAME.json (in
 * place of the file of that name, if there is one; its name is not
 * checked against a file name).  The extra volume is the last of
 * cfg->volumes.  The main file must have volumes_dir.
 */
int gw_config_load_extra (const char *file, const struct gw_extra_volume *extra,
                          bool check_paths, struct gw_config *cfg, char *err,
                          size_t errlen);

/* The same from a string (file is only used in messages). */
int gw_config_parse (const char *file, const char *text, bool check_paths,
                     struct gw_config *cfg, char *err, size_t errlen);

/* Free everything *cfg holds and zero it. */
void gw_config_free (struct gw_config *cfg);

/* s is a volume name: [A-Za-z0-9._-]{1,64}. */
bool gw_is_volume_name (const char *s);

/* The volume named name, or NULL. */
const struct gw_volume *gw_config_find (const struct gw_config *cfg,
                                        const char *name);

/* Whether two volumes would run with the same nbdkit arguments. */
bool gw_volume_equal (const struct gw_volume *a, const struct gw_volume *b);

/* "file", "nbd", "cos", "iscsi". */
const char *gw_backend_type_to_string (enum gw_backend_type t);

#endif /* HHC_APPLIANCE_GWCONFIG_H */
