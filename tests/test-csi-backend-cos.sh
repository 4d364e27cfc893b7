#!/usr/bin/env bash
# hhc-csi's cos backend on s3rver: tests/unit/test-csi-backend's cos
# cases (create twice, an incompatible size, claims by two nodes,
# delete while claimed, delete of every object over several listing
# pages and of nothing beside the volume, volume.json as the plugin
# writes it, the gateway's backend object, missing secrets).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

make_tmpdir
source "$(dirname "$0")/s3.sh"
prog=$abs_top_builddir/tests/unit/test-csi-backend
[ -x "$prog" ] || fail "$prog: not built"

start_s3rver csi
# The unit test reads the server and its keys from the environment
# (s3rver's fixed test keys, not secrets).
HHC_CSI_S3_ENDPOINT=$s3_endpoint HHC_CSI_S3_BUCKET=csi \
  HHC_CSI_S3_ACCESS_KEY=$s3_access_key HHC_CSI_S3_SECRET_KEY=$s3_secret_key \
  "$prog" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the cos cases failed"; }
cat "$tmp/out"
if grep -q SKIPPED "$tmp/out"; then
  fail "a cos case was skipped with the server given"
fi
# Nothing is left in the bucket.
left=$(find "$s3_data/csi" -name '*._S3rver_object' | wc -l)
[ "$left" -eq 0 ] || fail "$left objects left in the bucket"
