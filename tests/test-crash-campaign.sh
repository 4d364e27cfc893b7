#!/usr/bin/env bash
# A short run of the crash campaign (scripts/campaign/crash): kill -9
# of the gateway under the verifying load, in every mode (hhc also with
# ssd-sync=checkpoint), and the loss of the SSD in pt, wt, wbflush and
# hhc (replayed from the HDD log),
# and in hhc with two mirrors the loss or corruption of one of them,
# and in pt, wt, wb, wbflush and hhc a backend whose flush fails (and
# drops what it had not flushed) at random moments under the load,
# and in hhc (also with ssd-sync=checkpoint) a log mirror served over
# NBD whose writes fail and heal at random moments (FLUSHes fall back
# to write-back, the failed mirror is voided), the SSD lost in every
# other round, and with two mirrors one failing before the kill (the
# restart on it alone refused, or losing nothing); and with
# seq-cutoff= drawn in each round (off, 1: every
# request bypasses the cache, 64K) the kill and the SSD loss in every
# mode; and in hhc with 4M log segments: no flushed write lost, no
# block corrupt.  Then the
# campaign must see a loss where there is one: wb does not survive the
# loss of its SSD.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit
# Debian's nbdkit-plugin-python, for tests/dropflush.py (flushfail).
nbdkit python --dump-plugin >/dev/null 2>&1 || requires nbdkit-plugin-python
# nbdkit's error filter, for the flapping log mirror (mirrorflap).
nbdkit --filter=error null --dump-plugin >/dev/null 2>&1 ||
  requires nbdkit-error-filter
requires python3
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

# promote=nhit: read misses counted and read around the cache until a
# block's second miss (a small window, so that counts also expire).
CAMPAIGN_PARAMS="promote=nhit promote-hits=2 promote-window=512" \
  "$campaign" 2 800 wt wb hhc >"$tmp/nhit.out" 2>&1 ||
  { cat "$tmp/nhit.out"; fail "the crash campaign with promote=nhit failed"; }
tail -1 "$tmp/nhit.out"
grep -q '^crash: 6 rounds passed, 0 lost or corrupt blocks' "$tmp/nhit.out" ||
  fail "unexpected promote=nhit campaign summary: $(tail -1 "$tmp/nhit.out")"

# Segments of 4M (the default for logs from 113M; the 16M logs here
# default to 1M) on a 64M log (the later log-size wins): a kill and an
# SSD loss in hhc, both ssd-sync.
CAMPAIGN_PARAMS="segment-size=4M log-size=64M" "$campaign" 2 800 hhc hhc-ckpt \
  >"$tmp/seg4m.out" 2>&1 ||
  { cat "$tmp/seg4m.out"; fail "the crash campaign with segment-size=4M failed"; }
tail -1 "$tmp/seg4m.out"
grep -q '^crash: 4 rounds passed, 0 lost or corrupt blocks' "$tmp/seg4m.out" ||
  fail "unexpected segment-size=4M campaign summary: $(tail -1 "$tmp/seg4m.out")"

# Mode hhc with two log mirrors: a mirror lost, the SSD and a mirror
# lost, a mirror corrupted and the SSD lost, every mirror lost.
CAMPAIGN_MIRRORS=2 CAMPAIGN_FAULTS="mirror ssdmirror corrupt allmirrors" \
  "$campaign" 4 800 hhc >"$tmp/mirrors.out" 2>&1 ||
  { cat "$tmp/mirrors.out"; fail "the log-fault campaign failed"; }
tail -1 "$tmp/mirrors.out"

# The backend's flush fails at random moments: every FLUSH that
# succeeded must hold after kill -9, and some FLUSH must have failed
# (or the fault never fired).
CAMPAIGN_FAULTS=flushfail "$campaign" 2 800 pt wt wb wbflush hhc \
  >"$tmp/flushfail.out" 2>&1 ||
  { cat "$tmp/flushfail.out"; fail "the flush-failure campaign failed"; }
tail -1 "$tmp/flushfail.out"
grep -q '^crash: 10 rounds passed, 0 lost or corrupt blocks' \
  "$tmp/flushfail.out" ||
  fail "unexpected flush-failure campaign summary:" \
       "$(tail -1 "$tmp/flushfail.out")"
grep -Eq ', [0-9]+ failed writes, [1-9][0-9]* failed flushes;' \
  "$tmp/flushfail.out" ||
  { cat "$tmp/flushfail.out"; fail "no FLUSH failed: the flushfail fault never fired"; }

# The log mirror fails and heals at random moments (about 10 s): every
# FLUSH that succeeded must hold after kill -9 (and the SSD's loss in
# every other round), no FLUSH may fail (they fall back to write-back),
# and some must have fallen back (or the fault never fired).  Then with
# two mirrors, one flapping: no fallback, the failed one voided at once.
CAMPAIGN_FAULTS=mirrorflap "$campaign" 4 800 hhc hhc-ckpt \
  >"$tmp/mirrorflap.out" 2>&1 ||
  { cat "$tmp/mirrorflap.out"; fail "the mirror-failure campaign failed"; }
tail -2 "$tmp/mirrorflap.out"
grep -q '^crash: 8 rounds passed, 0 lost or corrupt blocks' \
  "$tmp/mirrorflap.out" ||
  fail "unexpected mirror-failure campaign summary:" \
       "$(tail -1 "$tmp/mirrorflap.out")"
! grep -Eq ', ([1-9][0-9]* failed writes|[0-9]+ failed writes, [1-9][0-9]* failed flushes);' \
  "$tmp/mirrorflap.out" ||
  { cat "$tmp/mirrorflap.out"; fail "a request failed under mirrorflap"; }
grep -Eq '^crash: mirrorflap: 8 rounds, [1-9][0-9]* FLUSHes fell back' \
  "$tmp/mirrorflap.out" ||
  { cat "$tmp/mirrorflap.out"; fail "no FLUSH fell back: the mirrorflap fault never fired"; }
CAMPAIGN_MIRRORS=2 CAMPAIGN_FAULTS=mirrorflap "$campaign" 2 800 hhc \
  >"$tmp/mirrorflap2.out" 2>&1 ||
  { cat "$tmp/mirrorflap2.out"; fail "the two-mirror mirrorflap campaign failed"; }
tail -2 "$tmp/mirrorflap2.out"
grep -Eq '^crash: mirrorflap: 2 rounds, 0 FLUSHes fell back, [1-9][0-9]* mirrors failed' \
  "$tmp/mirrorflap2.out" ||
  { cat "$tmp/mirrorflap2.out"; fail "no mirror failed, or a FLUSH fell back, with two mirrors"; }

# Two mirrors, the NBD one failing before the kill (for good, or
# healed and voided in every other such round); the start on it alone
# must be refused or lose nothing (a FLUSH after its failure is only on
# the other mirror).
CAMPAIGN_MIRRORS=2 CAMPAIGN_FAULTS="mirrordead kill" "$campaign" 4 800 \
  hhc-ckpt hhc >"$tmp/mirrordead.out" 2>&1 ||
  { cat "$tmp/mirrordead.out"; fail "the mirrordead campaign failed"; }
tail -2 "$tmp/mirrordead.out"
grep -q '^crash: mirrordead: 4 rounds' "$tmp/mirrordead.out" ||
  { cat "$tmp/mirrordead.out"; fail "unexpected mirrordead summary"; }

CAMPAIGN_SEQCUT=yes "$campaign" 3 800 >"$tmp/seqcut.out" 2>&1 ||
  { cat "$tmp/seqcut.out"; fail "the campaign with seq-cutoff failed"; }
tail -1 "$tmp/seqcut.out"
grep -q '^crash: 18 rounds passed, 0 lost or corrupt blocks' "$tmp/seqcut.out" ||
  fail "unexpected campaign summary: $(tail -1 "$tmp/seqcut.out")"
grep -q 'seq-cutoff=1 after' "$tmp/seqcut.out" ||
  fail "no round drew seq-cutoff=1: $(cat "$tmp/seqcut.out")"

st=0
CAMPAIGN_FAULTS=ssd "$campaign" 1 800 wb >"$tmp/negative.out" 2>&1 || st=$?
[ "$st" -eq 1 ] && grep -q 'lost: ' "$tmp/negative.out" ||
  { cat "$tmp/negative.out"; fail "the campaign did not see wb lose its SSD"; }
echo "$_hhc_name: ok"
