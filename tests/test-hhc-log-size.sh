#!/usr/bin/env bash
# A log that cannot hold dirty-max of the cache is named at start, with
# both sizes and the parameter to change; a log that can is not.  And
# without segment-size the log's size picks it (log_default_segment):
# 1M, 2M or 4M, stats= log.segment_bytes.
#
# Each case starts `nbdkit --filter=hhc null 1G cache=... log=...` in
# mode hhc with a 192M cache (dirty-max 95 %: 182M of dirty blocks),
# makes one connection, and checks nbdkit's stderr for the warning.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo
hhc=$(filter)
make_tmpdir

# start_with LOG-SIZE [PARAMS...]: one connection to a fresh gateway;
# its stderr in $tmp/err.
start_with ()
{
  local size=$1
  shift
  rm -f -- "$tmp/cache.img" "$tmp/log.img" "$tmp/stats.json"
  # shellcheck disable=SC2016 # nbdkit --run expands $uri
  nbdkit -U - --filter="$hhc" null 1G cache="$tmp/cache.img" \
    cache-size=192M log="$tmp/log.img" log-size="$size" mode=hhc \
    backend-id=log-size-test stats="$tmp/stats.json" "$@" \
    --run 'nbdinfo --size "$uri"' \
    >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "log-size=$size $*: the gateway failed"; }
}

want="hhc: warning: log-size=64M holds less than dirty-max=95% of"
want+=" cache-size=192M (182M): FLUSHes will wait for write-back to the"
want+=" backend when the dirty blocks fill the log; make log-size at least"
want+=" 210M, or lower dirty-max"

start_with 64M
grep -qF -- "$want" "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "log-size=64M: no warning, or not: $want"; }
[ "$(grep -c 'log-size=' "$tmp/err")" = 1 ] ||
  { cat "$tmp/err" >&2; fail "log-size=64M: warned more than once"; }

# dirty-max=25 of 192M (48M) fits in 64M (with the 14M kept at the
# tail for 4 buffers + 3 of 2M): no warning.
start_with 64M dirty-low=10 dirty-high=20 dirty-max=25
! grep -q 'log-size=' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "dirty-max=25: warned for a log that fits"; }

# The size the warning asks for is enough, although its segments are
# bigger than the 64M log's.
start_with 210M
! grep -q 'log-size=' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "log-size=210M: warned for a log that fits"; }

# segment_bytes: the segment size in use.
segment_bytes () {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["log"]["segment_bytes"])' \
    "$tmp/stats.json"
}
# want_segment LOG-SIZE BYTES [PARAMS...]
want_segment ()
{
  local size=$1 want=$2 got
  shift 2
  start_with "$size" "$@"
  got=$(segment_bytes)
  [ "$got" = "$want" ] ||
    fail "log-size=$size $*: segments of $got bytes, not $want"
}
want_segment 210M $((4 << 20))
# 7 segments of 4M fit in a quarter of the region (the log less its
# first 64K) above 112M, of 2M above 56M.
want_segment 113M $((4 << 20))
want_segment 112M $((2 << 20))
want_segment 57M $((2 << 20))
want_segment 56M $((1 << 20))
want_segment 16M $((1 << 20))
# 18 buffers (log-inflight=16) take at most 16M: 512K is below the 1M
# floor, which keeps them at 18M.
want_segment 1G $((1 << 20)) log-inflight=16
want_segment 1G $((4 << 20)) log-buffers=4
want_segment 1G $((64 << 10)) segment-size=64K
