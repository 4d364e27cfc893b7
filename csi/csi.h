/* hhc-csi's C core (hhc-csi(8)).  The gRPC layer, server.cc, turns
 * each CSI request into the plain structures below, calls one entry
 * point and turns the struct csi_err it fills into a gRPC status.
 * Nothing here knows gRPC or protobuf; nothing here logs a secret.
 *
 *   csi.h            this file: codes, maps, the config, entry points
 *   csi-config.c     the config file (csi_conf_load)
 *   csi-util.c       errors, maps, volume ids, sizes
 *   backend-file.c   file backend: images in a directory
 *   backend-cos.c    cos backend: a prefix in a bucket (cos-backend's
 *                    S3 client)
 *   backend-iscsi.c  iscsi backend: pre-provisioned LUNs
 *   claim-file.c     claims as files (file and iscsi backends)
 *   backend.c        dispatch by type, claims (who has it staged)
 *   controller.c     CreateVolume, DeleteVolume, Validate...
 *   node.c           NodeStage/Unstage/Publish/Unpublish/Stats
 *   attach.c         a block device for an export: nbd-client, or
 *                    nbdfuse + a loop device
 *   mount.c          mkfs when blank, mount, bind mounts, mountinfo
 *   run.c            run a helper program (argv, never a shell)
 */
#ifndef HHC_CSI_H
#define HHC_CSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CSI_DRIVER_NAME "hhc.csi.hhc-gateway.io"
#define CSI_DEFAULT_CONFIG "/etc/hhc/csi.json"

/* The gRPC status codes the CSI specification names. */
enum csi_code {
  CSI_OK = 0,
  CSI_INVALID_ARGUMENT = 3,
  CSI_NOT_FOUND = 5,
  CSI_ALREADY_EXISTS = 6,
  CSI_RESOURCE_EXHAUSTED = 8,
  CSI_FAILED_PRECONDITION = 9,
  CSI_ABORTED = 10,
  CSI_OUT_OF_RANGE = 11,
  CSI_INTERNAL = 13,
  CSI_UNAVAILABLE = 14,
};

struct csi_err {
  enum csi_code code;
  char msg[512]; /* one line, no secret */
};

/* Set *e and return -1. */
int csi_fail (struct csi_err *e, enum csi_code code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* A protobuf map<string,string> as the core sees it. */
struct csi_kv {
  const char *key, *value;
};
struct csi_map {
  const struct csi_kv *kv;
  size_t n;
};
/* The value of key, or NULL. */
const char *csi_map_get (const struct csi_map *m, const char *key);

/* ---- The config file (csi-config.c), hhc-csi(8) "CONFIGURATION" ---- */

enum csi_backend_type { CSI_FILE, CSI_COS, CSI_ISCSI };

#define CSI_MAX_BACKENDS 16
#define CSI_MAX_LUNS 64
#define CSI_MAX_LOGS 8

struct csi_lun {   /* iscsi: one pre-provisioned LUN, a static volume */
  char *name;      /* the volume id's NAME part */
  char *url;       /* iscsi://host[:port]/iqn/lun */
  char *chap_file; /* or NULL */
};

struct csi_backend {
  char *name; /* [a-z0-9-]{1,16}: the volume id's BACKEND part */
  enum csi_backend_type type;
  uint64_t max_size; /* largest volume CreateVolume makes; 0: no limit */
  /* file */
  char *dir; /* the images: DIR/NAME.img, claims DIR/NAME.claim */
  /* cos */
  char *endpoint, *bucket, *region, *prefix; /* prefix may be "" */
  bool tls_verify;
  char *ca_file;        /* or NULL */
  uint64_t object_size; /* for new volumes; 0: the plugin's default */
  /* iscsi */
  char *claims_dir; /* claims CLAIMS_DIR/LUN.claim; every node mounts it */
  struct csi_lun luns[CSI_MAX_LUNS];
  unsigned nluns;
};

struct csi_node_conf {
  char *gateway_config; /* the node's hhc-gateway.json */
  char *hhcctl;         /* program; default "hhcctl" (PATH) */
  char *nbd_host;       /* the gateway's NBD address: host and port, */
  unsigned nbd_port;    /* or a Unix socket (then nbd_host NULL) */
  char *nbd_socket;
  char *cache_dir; /* per volume: CACHE_DIR/EXPORT.cache */
  uint64_t cache_size;
  char *log_dirs[CSI_MAX_LOGS]; /* per volume: DIR/EXPORT.log each */
  unsigned nlog_dirs;
  uint64_t log_size;
  char *mode;           /* default "hhc" */
  char *state_dir;      /* hhc-csi's own records and secrets files */
  char *attach;         /* "auto" (default), "nbd", "nbdfuse" */
  unsigned max_volumes; /* NodeGetInfo; staging more: RESOURCE_EXHAUSTED */
  unsigned wait_s;      /* bound on waiting for the gateway; default 120 */
};

struct csi_conf {
  char *file;
  struct csi_backend backends[CSI_MAX_BACKENDS];
  unsigned nbackends;
  bool have_node; /* the "node" section is present */
  struct csi_node_conf node;
};

/* Read and check FILE.  0, or -1 with one line "FILE: message" in err.
 * The config names no secret: those come in the CSI calls.
 */
int csi_conf_load (const char *file, struct csi_conf *c, char *err,
                   size_t errlen);
void csi_conf_free (struct csi_conf *c);
const struct csi_backend *csi_conf_backend (const struct csi_conf *c,
                                            const char *name);

/* "64M", "1G", "4096": bytes.  -1 when not a size. */
int csi_parse_size (const char *s, uint64_t *out);

/* ---- Volume ids ---- */

/* A volume id is "BACKEND:NAME", NAME [A-Za-z0-9._-]{1,47} (the name
 * CreateVolume was given: "pvc-<uuid>" from Kubernetes).  Its export
 * on the node's gateway is "BACKEND.NAME" (64 characters at most; a
 * backend name has no '.', so the export names no other volume).
 */
#define CSI_NAME_MAX 47
struct csi_volid {
  const struct csi_backend *backend;
  char name[CSI_NAME_MAX + 1];
  char export_name[72];
  char id[72];
};
/* INVALID_ARGUMENT for a malformed id, NOT_FOUND for an unknown
 * backend.
 */
int csi_volid_parse (const struct csi_conf *c, const char *id,
                     struct csi_volid *v, struct csi_err *e);
/* Whether name is a valid NAME (CreateVolume's name). */
bool csi_name_valid (const char *name);
/* Whether name is a valid backend name, [a-z0-9-]{1,16}. */
bool csi_backend_name_valid (const char *name);

/* ---- Parameters: StorageClass parameters and volume context ----
 *
 *   backend    a backend of the config (CreateVolume: required)
 *   mode       pt wt wb wbflush hhc (default the node's mode)
 *   cacheSize  the volume's cache file (default the node's cache_size)
 *   logSize    each log file (default the node's log_size)
 *
 * Keys starting with "csi.storage.k8s.io/" are the CO's and ignored;
 * any other key is INVALID_ARGUMENT.  CreateVolume returns the valid
 * ones but "backend" as the volume context; NodeStageVolume reads
 * them back.
 */
struct csi_params {
  const char *backend; /* pointers into the map */
  const char *mode;
  const char *cache_size;
  const char *log_size;
};
int csi_params_parse (const struct csi_map *m, struct csi_params *p,
                      struct csi_err *e);

/* ---- Controller (controller.c) ---- */

struct csi_create_req {
  const char *name;
  uint64_t required, limit; /* 0: not given */
  struct csi_map params, secrets;
};

struct csi_volume_out {
  char id[72];
  uint64_t capacity;
  /* the volume context: keys mode, cacheSize, logSize when given */
  struct csi_kv ctx[3];
  size_t nctx;
};

int csi_create_volume (const struct csi_conf *c, const struct csi_create_req *r,
                       struct csi_volume_out *out, struct csi_err *e);
/* A missing volume is success (idempotent); a claimed (staged) one is
 * FAILED_PRECONDITION.
 */
int csi_delete_volume (const struct csi_conf *c, const char *id,
                       const struct csi_map *secrets, struct csi_err *e);
/* NOT_FOUND when the volume does not exist; else 0 and its size. */
int csi_volume_size (const struct csi_conf *c, const char *id,
                     const struct csi_map *secrets, uint64_t *size,
                     struct csi_err *e);

/* ---- Node (node.c) ---- */

struct csi_stage_req {
  const char *node_id;
  const char *volume_id;
  const char *staging_path;
  bool block;                     /* access type block, else mount */
  const char *fs_type;            /* mount: "" or NULL = ext4 */
  const char *const *mount_flags; /* mount: never logged */
  size_t nflags;
  bool readonly; /* an access mode that only reads */
  struct csi_map secrets, context;
};
int csi_node_stage (const struct csi_conf *c, const struct csi_stage_req *r,
                    struct csi_err *e);
int csi_node_unstage (const struct csi_conf *c, const char *node_id,
                      const char *volume_id, const char *staging_path,
                      struct csi_err *e);

struct csi_publish_req {
  const char *volume_id;
  const char *staging_path;
  const char *target_path;
  bool block, readonly;
  const char *const *mount_flags;
  size_t nflags;
};
int csi_node_publish (const struct csi_conf *c, const struct csi_publish_req *r,
                      struct csi_err *e);
int csi_node_unpublish (const struct csi_conf *c, const char *volume_id,
                        const char *target_path, struct csi_err *e);

struct csi_stats {
  bool block; /* only bytes_total is set */
  uint64_t bytes_total, bytes_avail, bytes_used;
  uint64_t inodes_total, inodes_avail, inodes_used;
};
int csi_node_stats (const struct csi_conf *c, const char *volume_id,
                    const char *volume_path, struct csi_stats *st,
                    struct csi_err *e);

/* ---- Messages ---- */

/* One line to standard error, "hhc-csi: ..." (never a secret). */
void csi_log (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif /* HHC_CSI_H */
