#!/usr/bin/env bash
# A short run of the crash campaign (scripts/campaign/crash): kill -9
# of the gateway under the verifying load, in every mode (hhc also with
# ssd-sync=checkpoint), and the loss of the SSD in pt, wt, wbflush and
# hhc (replayed from the HDD log),
# and in hhc with two mirrors the loss or corruption of one of them:
# no flushed write lost, no block corrupt.  Then the campaign must see
# a loss where there is one: wb does not survive the loss of its SSD.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit
hhc=$(filter)
make_tmpdir
verify=$abs_top_builddir/tests/verify/hhc-verify
[ -x "$verify" ] || fail "$verify: not built"
campaign=$abs_top_srcdir/scripts/campaign/crash
export HHC_FILTER=$hhc HHC_VERIFY=$verify TMPDIR=$tmp

"$campaign" 4 800 >"$tmp/campaign.out" 2>&1 ||
  { cat "$tmp/campaign.out"; fail "the crash campaign failed"; }
tail -1 "$tmp/campaign.out"
grep -q '^crash: 24 rounds passed, 0 lost or corrupt blocks' "$tmp/campaign.out" ||
  fail "unexpected campaign summary: $(tail -1 "$tmp/campaign.out")"

# Mode hhc with two log mirrors: a mirror lost, the SSD and a mirror
# lost, a mirror corrupted and the SSD lost, every mirror lost.
CAMPAIGN_MIRRORS=2 CAMPAIGN_FAULTS="mirror ssdmirror corrupt allmirrors" \
  "$campaign" 4 800 hhc >"$tmp/mirrors.out" 2>&1 ||
  { cat "$tmp/mirrors.out"; fail "the log-fault campaign failed"; }
tail -1 "$tmp/mirrors.out"

st=0
CAMPAIGN_FAULTS=ssd "$campaign" 1 800 wb >"$tmp/negative.out" 2>&1 || st=$?
[ "$st" -eq 1 ] && grep -q 'lost: ' "$tmp/negative.out" ||
  { cat "$tmp/negative.out"; fail "the campaign did not see wb lose its SSD"; }
echo "$_hhc_name: ok"
