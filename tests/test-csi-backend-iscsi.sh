#!/usr/bin/env bash
# hhc-csi's iscsi backend on tgtd: tests/unit/test-csi-backend's iscsi
# case with a real LUN of 16 MiB (its size through libiscsi's READ
# CAPACITY(16)) and its claims in a claims_dir of this test's: node a
# claims, node b's claim is FAILED_PRECONDITION, DeleteVolume while
# claimed is FAILED_PRECONDITION, a releases, DeleteVolume succeeds and
# leaves the LUN's data as it was; the claims_dir is empty afterwards
# (no claim, no half-made file left).  Then hhc-csi --check: an iscsi
# backend without claims_dir is refused with one line naming the key.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires cmp
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
prog=$abs_top_builddir/tests/unit/test-csi-backend
[ -x "$prog" ] || fail "$prog: not built"

start_tgtd
head -c 16M /dev/urandom >"$tmp/lun.img"
cp "$tmp/lun.img" "$tmp/expected.img"
add_lun iqn.2026-01.test:csi "$tmp/lun.img"
mkdir "$tmp/claims"

HHC_CSI_ISCSI_URL=$(tgt_url) HHC_CSI_CLAIMS_DIR=$tmp/claims "$prog" \
  >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the iscsi case failed"; }
cat "$tmp/out"
grep -q '^\[       OK \] test_iscsi$' "$tmp/out" ||
  fail "test_iscsi did not run"
cmp "$tmp/lun.img" "$tmp/expected.img" ||
  fail "DeleteVolume changed the LUN's data"
left=$(ls -A "$tmp/claims")
[ -z "$left" ] || fail "claims_dir holds $left after the release"

# The config: claims_dir is required for an iscsi backend.
csi=$abs_top_builddir/csi/hhc-csi
if [ ! -x "$csi" ]; then
  echo "$0: hhc-csi not built (configure --with-csi): config checks not run"
  exit 0
fi
conf ()
{
  cat >"$tmp/csi.json" <<JSON
{ "backends": { "san": { "type": "iscsi", $1
    "luns": { "db1": { "url": "$(tgt_url)" } } } } }
JSON
}
conf "\"claims_dir\": \"$tmp/claims\","
"$csi" --check --config="$tmp/csi.json" ||
  fail "hhc-csi --check refused an iscsi backend with claims_dir"
conf ""
if "$csi" --check --config="$tmp/csi.json" 2>"$tmp/err"; then
  fail "hhc-csi --check accepted an iscsi backend without claims_dir"
fi
cat "$tmp/err"
want="hhc-csi: $tmp/csi.json: backends.san.claims_dir is missing: iSCSI LUNs are fenced by claim files in a directory every node shares"
[ "$(cat "$tmp/err")" = "$want" ] ||
  fail "hhc-csi --check: expected '$want'"
