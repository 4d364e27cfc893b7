#!/usr/bin/env bash
# A short run of the backend-outage campaign (scripts/campaign/outage):
# in every mode the backend stops answering for a while under the
# verifying load; every write succeeds, everything is written back
# afterwards, and the checks through the gateway and on the backend
# find no lost or corrupt block.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit python3
hhc=$(filter)
make_tmpdir
export HHC_FILTER=$hhc HHC_VERIFY=$abs_top_builddir/tests/verify/hhc-verify \
  TMPDIR=$tmp

"$abs_top_srcdir/scripts/campaign/outage" 1 1500 >"$tmp/campaign.out" 2>&1 ||
  { cat "$tmp/campaign.out"; fail "the outage campaign failed"; }
tail -1 "$tmp/campaign.out"
grep -q '^outage: 5 rounds passed, 0 lost or corrupt blocks' "$tmp/campaign.out" ||
  fail "unexpected campaign summary: $(tail -1 "$tmp/campaign.out")"
echo "$_hhc_name: ok"
