#!/usr/bin/env bash
# hhc-csi's iscsi backend on tgtd: tests/unit/test-csi-backend's iscsi
# case with a real LUN of 16 MiB (its size through libiscsi's READ
# CAPACITY(16)); DeleteVolume leaves the LUN's data as it was.
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

HHC_CSI_ISCSI_URL=$(tgt_url) "$prog" >"$tmp/out" 2>&1 ||
  { cat "$tmp/out"; fail "the iscsi case failed"; }
cat "$tmp/out"
grep -q '^\[       OK \] test_iscsi$' "$tmp/out" ||
  fail "test_iscsi did not run"
cmp "$tmp/lun.img" "$tmp/expected.img" ||
  fail "DeleteVolume changed the LUN's data"
