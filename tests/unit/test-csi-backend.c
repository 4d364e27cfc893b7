/* Unit test of hhc-csi's backend layer (csi/backend*.c) and its
 * controller (csi/controller.c).
 *
 * file: end to end in a temporary directory: CreateVolume twice (the
 * same volume), an incompatible size (ALREADY_EXISTS), sizes out of
 * range, claims by node a and b, delete while claimed, release, delete
 * twice, the gateway's backend object.
 *
 * iscsi: what a static volume allows, its claims in claims_dir (by node
 * a, by b refused, delete while claimed refused, release, delete); its
 * size from a real LUN when HHC_CSI_ISCSI_URL is set, claims in
 * HHC_CSI_CLAIMS_DIR when set (tests/test-csi-backend-iscsi.sh: tgtd).
 *
 * cos: the same against a real S3 server when HHC_CSI_S3_ENDPOINT,
 * _BUCKET, _ACCESS_KEY and _SECRET_KEY are set (tests/test-csi-cos.sh
 * starts s3rver and runs this program so); skipped otherwise.
 */
#include <config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend-cos.h"
#include "backend-int.h"
#include "backend.h"
#include "csi.h"
#include "volume-json.h"

#define MiB (UINT64_C (1) << 20)

static struct csi_conf conf;
static char dir[] = "/tmp/hhc-csi-test.XXXXXX";
static char claims[64];
static const struct csi_kv keys[2]
    = { { "access_key", NULL }, { "secret_key", NULL } };
static struct csi_kv keyv[2];
static struct csi_map secrets = { keyv, 2 };

static int
setup_file (void **state)
{
  (void)state;
  assert_non_null (mkdtemp (dir));
  memset (&conf, 0, sizeof conf);
  conf.nbackends = 2;
  conf.backends[0] = (struct csi_backend){
    .name = (char *)"f", .type = CSI_FILE, .dir = dir, .max_size = 64 * MiB
  };
  /* iscsi: LUN "lun1" at $HHC_CSI_ISCSI_URL (a LUN of 16 MiB), or at a
   * URL where nothing answers; claims in $HHC_CSI_CLAIMS_DIR or DIR/claims.
   */
  snprintf (claims, sizeof claims, "%s/claims", dir);
  assert_int_equal (mkdir (claims, 0700), 0);
  conf.backends[1]
      = (struct csi_backend){ .name = (char *)"i",
                              .type = CSI_ISCSI,
                              .claims_dir = getenv ("HHC_CSI_CLAIMS_DIR")
                                                ? getenv ("HHC_CSI_CLAIMS_DIR")
                                                : claims,
                              .nluns = 1 };
  conf.backends[1].luns[0] = (struct csi_lun){
    .name = (char *)"lun1",
    .url = getenv ("HHC_CSI_ISCSI_URL"),
  };
  if (conf.backends[1].luns[0].url == NULL)
    conf.backends[1].luns[0].url = (char *)"iscsi://127.0.0.1:1/iqn.x:y/1";
  return 0;
}

static int
teardown_file (void **state)
{
  char cmd[128];

  (void)state;
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system (cmd) == 0 ? 0 : -1;
}

/* CreateVolume NAME on BACKEND of REQUIRED..LIMIT: the code. */
static enum csi_code
create (const char *backend, const char *name, uint64_t required,
        uint64_t limit, struct csi_volume_out *out)
{
  struct csi_kv p[2] = { { "backend", backend }, { "mode", "wb" } };
  struct csi_create_req r = { .name = name,
                              .required = required,
                              .limit = limit,
                              .params = { p, 2 },
                              .secrets = secrets };
  struct csi_err e = { 0 };

  if (csi_create_volume (&conf, &r, out, &e) == -1)
    {
      assert_int_not_equal (e.code, CSI_OK);
      return e.code;
    }
  return CSI_OK;
}

static enum csi_code
claim (const char *id, const char *node, bool release)
{
  struct csi_volid v;
  struct csi_err e = { 0 };

  assert_int_equal (csi_volid_parse (&conf, id, &v, &e), 0);
  if ((release ? backend_release (&v, node, &secrets, &e)
               : backend_claim (&v, node, &secrets, &e))
      == -1)
    {
      if (e.code == CSI_FAILED_PRECONDITION)
        assert_non_null (strstr (e.msg, "staged on node"));
      return e.code;
    }
  return CSI_OK;
}

static enum csi_code delete (const char *id) {
  struct csi_err e = { 0 };

  if (csi_delete_volume (&conf, id, &secrets, &e) == 0) return CSI_OK;
  print_message ("DeleteVolume %s: %s\n", id, e.msg);
  return e.code;
}

static uint64_t
size_of (const char *id)
{
  struct csi_err e = { 0 };
  uint64_t size = 0;

  if (csi_volume_size (&conf, id, &secrets, &size, &e) == -1)
    {
      print_message ("size of %s: %s\n", id, e.msg);
      assert_int_equal (e.code, CSI_NOT_FOUND);
      return 0;
    }
  return size;
}

/* The life of volume pvc-1 on backend B whose granularity is G. */
static void
lifecycle (const char *b, uint64_t g)
{
  struct csi_volume_out out, again;
  char id[64];

  snprintf (id, sizeof id, "%s:pvc-1", b);
  assert_int_equal (create (b, "pvc-1", 1000, 0, &out), CSI_OK);
  assert_string_equal (out.id, id);
  assert_int_equal (out.capacity, g);
  assert_int_equal (out.nctx, 1);
  assert_string_equal (out.ctx[0].key, "mode");
  assert_int_equal (create (b, "pvc-1", 1, g, &again), CSI_OK);
  assert_string_equal (again.id, id);
  assert_int_equal (again.capacity, g);
  assert_int_equal (size_of (id), g);
  assert_int_equal (create (b, "pvc-1", 2 * g, 0, &again), CSI_ALREADY_EXISTS);
  assert_int_equal (claim (id, "node-a", false), CSI_OK);
  assert_int_equal (claim (id, "node-a", false), CSI_OK);
  assert_int_equal (claim (id, "node-b", false), CSI_FAILED_PRECONDITION);
  assert_int_equal (delete (id), CSI_FAILED_PRECONDITION);
  assert_int_equal (claim (id, "node-b", true), CSI_FAILED_PRECONDITION);
  assert_int_equal (claim (id, "node-a", true), CSI_OK);
  assert_int_equal (claim (id, "node-a", true), CSI_OK);
  assert_int_equal (claim (id, "node-b", false), CSI_OK);
  assert_int_equal (claim (id, "node-b", true), CSI_OK);
  assert_int_equal (delete (id), CSI_OK);
  assert_int_equal (size_of (id), 0);
  assert_int_equal (delete (id), CSI_OK);
  assert_int_equal (claim (id, "node-a", false), CSI_NOT_FOUND);
}

/* Sizes and names CreateVolume refuses, with nothing made. */
static void
bad_input (const char *b, uint64_t g)
{
  struct csi_volume_out out;
  char id[64];

  assert_int_equal (create (b, "pvc-2", 2 * g, g, &out), CSI_OUT_OF_RANGE);
  assert_int_equal (create (b, "pvc-2", g + 1, g + 2, &out), CSI_OUT_OF_RANGE);
  assert_int_equal (create (b, "pvc-2", 65 * MiB, 0, &out), CSI_OUT_OF_RANGE);
  assert_int_equal (create (b, "pvc-2", UINT64_MAX, 0, &out), CSI_OUT_OF_RANGE);
  assert_int_equal (create (b, "bad/name", g, 0, &out), CSI_INVALID_ARGUMENT);
  assert_int_equal (create ("nosuch", "pvc-2", g, 0, &out),
                    CSI_INVALID_ARGUMENT);
  snprintf (id, sizeof id, "%s:pvc-2", b);
  assert_int_equal (size_of (id), 0);
  assert_int_equal (delete ("no-colon"), CSI_INVALID_ARGUMENT);
}

static void
test_file_lifecycle (void **state)
{
  char path[512];
  struct stat st;

  (void)state;
  lifecycle ("f", 4096);
  /* Only the defaults: 1 GiB over max_size is max_size. */
  struct csi_volume_out out;
  assert_int_equal (create ("f", "pvc-d", 0, 0, &out), CSI_OK);
  assert_int_equal (out.capacity, 64 * MiB);
  snprintf (path, sizeof path, "%s/pvc-d.img", dir);
  assert_int_equal (stat (path, &st), 0);
  assert_true ((uint64_t)st.st_blocks * 512 < MiB); /* sparse */
  assert_int_equal (delete ("f:pvc-d"), CSI_OK);
}

static void
test_file_bad_input (void **state)
{
  (void)state;
  bad_input ("f", 4096);
}

static void
test_file_gateway_json (void **state)
{
  struct csi_volid v;
  struct csi_err e = { 0 };
  char want[512], *json;

  (void)state;
  assert_int_equal (csi_volid_parse (&conf, "f:pvc-9", &v, &e), 0);
  json = backend_gateway_json (&v, NULL, &e);
  assert_non_null (json);
  snprintf (want, sizeof want, "{\"path\":\"%s/pvc-9.img\",\"type\":\"file\"}",
            dir);
  assert_string_equal (json, want);
  free (json);
  assert_false (backend_needs_credentials (&v));
}

/* ---- iscsi ---- */

/* Pre-provisioned LUNs: no CreateVolume, a DeleteVolume that leaves
 * the LUN alone (refused while claimed), the size from the LUN, claims
 * as the file backend's in claims_dir.
 */
static void
test_iscsi (void **state)
{
  struct csi_volume_out out;
  struct csi_volid v;
  struct csi_err e = { 0 };
  char *json, want[512];

  (void)state;
  assert_int_equal (create ("i", "lun2", MiB, 0, &out), CSI_INVALID_ARGUMENT);
  assert_int_equal (csi_volid_parse (&conf, "i:lun1", &v, &e), 0);
  assert_int_equal (
      backend_create (&v, MiB, &secrets, &out.capacity, &(bool){ false }, &e),
      -1);
  assert_non_null (strstr (e.msg, "volumeHandle i:LUN"));
  json = backend_gateway_json (&v, NULL, &e);
  assert_non_null (json);
  snprintf (want, sizeof want, "{\"type\":\"iscsi\",\"url\":\"%s\"}",
            v.backend->luns[0].url);
  assert_string_equal (json, want);
  free (json);
  assert_false (backend_needs_credentials (&v));
  assert_int_equal (claim ("i:lun1", "node-a", false), CSI_OK);
  assert_int_equal (claim ("i:lun1", "node-a", false), CSI_OK);
  assert_int_equal (claim ("i:lun1", "node-b", false), CSI_FAILED_PRECONDITION);
  assert_int_equal (delete ("i:lun1"), CSI_FAILED_PRECONDITION);
  assert_int_equal (claim ("i:lun1", "node-b", true), CSI_FAILED_PRECONDITION);
  assert_int_equal (claim ("i:lun1", "node-a", true), CSI_OK);
  assert_int_equal (claim ("i:lun1", "node-a", true), CSI_OK);
  assert_int_equal (claim ("i:lun1", "node-b", false), CSI_OK);
  assert_int_equal (claim ("i:lun1", "node-b", true), CSI_OK);
  assert_int_equal (claim ("i:nosuch", "node-a", false), CSI_NOT_FOUND);
  assert_int_equal (size_of ("i:nosuch"), 0); /* NOT_FOUND */
  if (getenv ("HHC_CSI_ISCSI_URL"))
    assert_int_equal (size_of ("i:lun1"), 16 * MiB);
  assert_int_equal (delete ("i:lun1"), CSI_OK);
  assert_int_equal (delete ("i:nosuch"), CSI_OK);
}

/* ---- cos ---- */

static int
setup_cos (void **state)
{
  const char *ep = getenv ("HHC_CSI_S3_ENDPOINT");

  (void)state;
  if (ep == NULL)
    return 0;
  keyv[0] = (struct csi_kv){ keys[0].key, getenv ("HHC_CSI_S3_ACCESS_KEY") };
  keyv[1] = (struct csi_kv){ keys[1].key, getenv ("HHC_CSI_S3_SECRET_KEY") };
  conf.nbackends = 3;
  conf.backends[2]
      = (struct csi_backend){ .name = (char *)"c",
                              .type = CSI_COS,
                              .endpoint = (char *)ep,
                              .bucket = getenv ("HHC_CSI_S3_BUCKET"),
                              .prefix = (char *)"k8s/",
                              .object_size = 64 * 1024,
                              .max_size = 64 * MiB };
  cos_list_max_keys = 2; /* several pages */
  return 0;
}

static void
test_cos_lifecycle (void **state)
{
  (void)state;
  if (conf.nbackends < 3)
    skip ();
  lifecycle ("c", 64 * 1024);
  bad_input ("c", 64 * 1024);
}

/* PUT KEY (a few bytes) straight to the store. */
static void
put (struct s3 *s3, const char *key)
{
  struct s3_io io = { .method = "PUT", .key = key, .body = "x", .body_len = 1 };

  assert_int_equal (s3_do (s3, &io), 0);
  free (io.text);
}

/* Whether KEY is in the store. */
static bool
exists (struct s3 *s3, const char *key)
{
  struct s3_io io = { .method = "HEAD", .key = key, .missing_ok = true };
  int r = s3_do (s3, &io);

  free (io.text);
  assert_int_not_equal (r, -1);
  return r == 0;
}

/* DeleteVolume removes every object of the volume, over several
 * listing pages, and nothing of a volume whose name it prefixes.
 */
static void
test_cos_delete_all (void **state)
{
  struct csi_volume_out out;
  struct csi_volid v;
  struct csi_err e = { 0 };
  struct s3 *s3;
  char key[128];

  (void)state;
  if (conf.nbackends < 3)
    skip ();
  assert_int_equal (create ("c", "pvc-3", MiB, 0, &out), CSI_OK);
  assert_int_equal (create ("c", "pvc-30", MiB, 0, &out), CSI_OK);
  assert_int_equal (csi_volid_parse (&conf, "c:pvc-3", &v, &e), 0);
  s3 = cos_open (&v, &secrets, &e);
  assert_non_null (s3);
  for (int i = 0; i < 7; i++)
    {
      snprintf (key, sizeof key, "k8s/pvc-3/%016x", i);
      put (s3, key);
    }
  assert_int_equal (delete ("c:pvc-3"), CSI_OK);
  for (int i = 0; i < 7; i++)
    {
      snprintf (key, sizeof key, "k8s/pvc-3/%016x", i);
      assert_false (exists (s3, key));
    }
  assert_false (exists (s3, "k8s/pvc-3/volume.json"));
  assert_true (exists (s3, "k8s/pvc-30/volume.json"));
  assert_int_equal (delete ("c:pvc-3"), CSI_OK);
  assert_int_equal (delete ("c:pvc-30"), CSI_OK);
  assert_false (exists (s3, "k8s/pvc-30/volume.json"));
  s3_close (s3);
}

/* volume.json is the plugin's; the gateway's backend object; missing
 * secrets are named, their values never shown.
 */
static void
test_cos_metadata (void **state)
{
  struct csi_volume_out out;
  struct csi_volid v;
  struct csi_err e = { 0 };
  struct s3 *s3;
  char *json, want[512];
  struct csi_kv only[1] = { { "access_key", "AKIDSECRETISH" } };
  struct csi_map one = { only, 1 };

  (void)state;
  if (conf.nbackends < 3)
    skip ();
  assert_int_equal (create ("c", "pvc-4", 100 * 1024, 0, &out), CSI_OK);
  assert_int_equal (out.capacity, 128 * 1024);
  assert_int_equal (csi_volid_parse (&conf, "c:pvc-4", &v, &e), 0);
  s3 = cos_open (&v, &secrets, &e);
  assert_non_null (s3);
  struct s3_io io = { .method = "GET", .key = "k8s/pvc-4/volume.json" };
  assert_int_equal (s3_do (s3, &io), 0);
  struct volume_json vj;
  char msg[256];
  assert_int_equal (volume_json_parse (io.text, io.text_len, "b", "k",
                                       128 * 1024, 64 * 1024, &vj, msg,
                                       sizeof msg),
                    0);
  free (io.text);
  s3_close (s3);

  json = backend_gateway_json (&v, "/run/c.cred", &e);
  assert_non_null (json);
  snprintf (want, sizeof want,
            "{\"bucket\":\"%s\",\"credentials\":\"/run/c.cred\","
            "\"endpoint\":\"%s\",\"prefix\":\"k8s/pvc-4\","
            "\"tls_verify\":false,\"type\":\"cos\"}",
            v.backend->bucket, v.backend->endpoint);
  assert_string_equal (json, want);
  free (json);
  assert_true (backend_needs_credentials (&v));

  assert_int_equal (backend_delete (&v, &one, &e), -1);
  assert_int_equal (e.code, CSI_INVALID_ARGUMENT);
  assert_non_null (strstr (e.msg, "secret_key"));
  assert_null (strstr (e.msg, "AKIDSECRETISH"));
  assert_int_equal (delete ("c:pvc-4"), CSI_OK);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_file_lifecycle),
    cmocka_unit_test (test_file_bad_input),
    cmocka_unit_test (test_file_gateway_json),
    cmocka_unit_test (test_iscsi),
    cmocka_unit_test (test_cos_lifecycle),
    cmocka_unit_test (test_cos_delete_all),
    cmocka_unit_test (test_cos_metadata),
  };
  int r;

  setup_file (NULL);
  setup_cos (NULL);
  r = cmocka_run_group_tests (tests, NULL, NULL);
  teardown_file (NULL);
  return r;
}
