#!/usr/bin/env bash
# promote=nhit keeps a one-pass scan out of the cache.
#
# The same workload runs on two gateways over a 32M file with a 16M
# cache: a hot megabyte read twice, then one pass over the whole
# volume.  With promote=always every read miss fills the cache (while
# it has free slots: at least half of it); with
# promote=nhit (promote-hits=2) only the hot megabyte's blocks do (at
# their second miss), so stats= shows the hot set's 256 fills and no
# more.  Then bad promote values are each refused with one error line
# naming the parameter.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
hhc=$(filter)
make_tmpdir

truncate -s 32M "$tmp/backend.img"

# fills PROMOTE: run the workload with promote=PROMOTE; read_fills into
# $tmp/PROMOTE.fills.
fills ()
{
  local p=$1
  start_nbdkit -P "$tmp/$p.pid" -U "$tmp/$p.sock" --filter="$hhc" \
               file "$tmp/backend.img" cache="$tmp/$p.cache" cache-size=16M \
               mode=wb backend-id=promote-test stats="$tmp/$p.json" \
               promote="$p" promote-hits=2
  nbdsh_u "$tmp/$p.sock" \
    -c 'for _ in range(2): h.pread(1 << 20, 0)' \
    -c 'for i in range(32): h.pread(1 << 20, i << 20)'
  # The file is rewritten once a second: wait for the last read.
  # shellcheck disable=SC2317 # called through poll_until
  counted () { python3 - "$tmp/$p.json" <<'PY' 2>/dev/null
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if s["read_hits"] + s["read_misses"] == 2 * 256 + 8192 else 1)
PY
  }
  poll_until 30 counted || fail "promote=$p: reads not counted in stats"
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["read_fills"])' \
          "$tmp/$p.json" >"$tmp/$p.fills"
  stop_nbdkit "$tmp/$p.pid"
}

fills always
fills nhit
always=$(cat "$tmp/always.fills")
nhit=$(cat "$tmp/nhit.fills")
echo "read_fills: promote=always $always, promote=nhit $nhit"
# (promote=always fills what free slots there are: the scan reads
# around a full cache while the flusher evicts.)
[ "$always" -ge 2048 ] ||
  fail "promote=always filled $always blocks, not half the cache"
[ "$nhit" -eq 256 ] || fail "promote=nhit filled $nhit blocks, not the hot 256"

# bad REGEX PARAMS...: refused, with exactly one hhc: error line.
bad ()
{
  local regex=$1
  shift
  # shellcheck disable=SC2016 # nbdkit --run expands $uri
  expect_fail_with "hhc: $regex" nbdkit -U - --filter="$hhc" null 16M \
                   cache="$tmp/bad.cache" cache-size=16M backend-id=bad "$@" \
                   --run 'true'
  n=$(grep -c 'hhc:' "$tmp/expect-$_hhc_nexpect.err")
  [ "$n" -eq 1 ] || fail "$*: $n error lines, not one"
  [ ! -e "$tmp/bad.cache" ] || fail "$*: the cache was created"
}

bad 'promote=sometimes: must be always or nhit' promote=sometimes
bad 'promote-hits=0: must be a whole number from 1 to 255' promote-hits=0
bad 'promote-hits=256: must be a whole number from 1 to 255' promote-hits=256
bad 'promote-window=2000000000: ' promote-window=2000000000
