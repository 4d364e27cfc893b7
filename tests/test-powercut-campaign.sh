#!/usr/bin/env bash
# A short run of the power-cut campaign (scripts/campaign/powercut):
# the gateway's cache, log and backend are disks that lose unflushed
# writes (tests/powercut); a power cut under the verifying load in
# every mode (mode hhc with 1, 2 and 8 barriers in flight, with two log
# mirrors, and with two that are left out of starts in turn: a stale
# one alone must be refused) must lose no flushed write and corrupt no
# block, also with 2M log segments.
# Then
# the campaign must see a loss where there is one: a backend that
# acknowledges flushes it does not do, in mode wt.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo
hhc=$(filter)
make_tmpdir
b=$abs_top_builddir
export HHC_FILTER=$hhc HHC_VERIFY=$b/tests/verify/hhc-verify \
  HHC_POWERCUT=$b/tests/powercut/.libs/nbdkit-powercut-plugin.so \
  HHC_POWERCUT_APPLY=$b/tests/powercut/powercut-apply TMPDIR=$tmp
campaign=$abs_top_srcdir/scripts/campaign/powercut

"$campaign" 3 800 >"$tmp/campaign.out" 2>&1 ||
  { cat "$tmp/campaign.out"; fail "the power-cut campaign failed"; }
tail -1 "$tmp/campaign.out"
grep -q '^powercut: hhc-swap: 1 restarts on a stale mirror alone refused' \
  "$tmp/campaign.out" || fail "hhc-swap: not one refusal in 3 rounds"
grep -q '^powercut: 30 rounds passed, 0 lost or corrupt blocks' "$tmp/campaign.out" ||
  fail "unexpected campaign summary: $(tail -1 "$tmp/campaign.out")"

# seq-cutoff=1: every request bypasses the cache (writes to the backend,
# a dirty block updated in place), with promote=nhit on the reads.
CAMPAIGN_PARAMS="seq-cutoff=1 promote=nhit" "$campaign" 2 800 wt wb hhc \
  >"$tmp/seqcut.out" 2>&1 ||
  { cat "$tmp/seqcut.out"; fail "the power-cut campaign with seq-cutoff=1 failed"; }
tail -1 "$tmp/seqcut.out"
grep -q '^powercut: 6 rounds passed, 0 lost or corrupt blocks' "$tmp/seqcut.out" ||
  fail "unexpected seq-cutoff campaign summary: $(tail -1 "$tmp/seqcut.out")"

# Segments of 2M (the default for logs from 57M; the 16M logs here
# default to 1M), one and two barriers in flight.
CAMPAIGN_PARAMS="segment-size=2M" "$campaign" 2 800 hhc hhc-ckpt hhc-k2 \
  >"$tmp/seg2m.out" 2>&1 ||
  { cat "$tmp/seg2m.out"; fail "the power-cut campaign with segment-size=2M failed"; }
tail -1 "$tmp/seg2m.out"
grep -q '^powercut: 6 rounds passed, 0 lost or corrupt blocks' "$tmp/seg2m.out" ||
  fail "unexpected segment-size=2M campaign summary: $(tail -1 "$tmp/seg2m.out")"

st=0
CAMPAIGN_LYING_DISK=backend "$campaign" 3 800 wt >"$tmp/negative.out" 2>&1 ||
  st=$?
[ "$st" -eq 1 ] && grep -q 'lost: ' "$tmp/negative.out" ||
  { cat "$tmp/negative.out"; fail "the campaign did not see the lying backend lose data"; }
echo "$_hhc_name: ok"
