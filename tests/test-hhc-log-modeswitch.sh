#!/usr/bin/env bash
# A cache last used in mode hhc is paired with its log, which holds its
# dirty blocks.  Opening that cache in another mode would let the
# volume move on while the log stays as it was, and a later loss of
# the SSD would replay the old log over newer data.  So a non-hhc
# start of such a cache is refused with an error that names the cache
# and asks for log=, unless log= gives the cache's own log: that log is
# then voided, and the cache no longer needs one.  x is block 5.
#   1. hhc with log L (mirrors l and l2): write x=A, FLUSH, clean stop
#      (x dirty, in L).
#   2. wbflush without log=: refused (the error names the cache and
#      log=); wb with log= a blank file that is not L: refused; wb with
#      l and a blank file in place of l2: refused (a blank device is
#      not a mirror of L: l2 would be left valid, and replayed after a
#      loss of the SSD; found by review).  All leave the cache, L and
#      the blank file unchanged.
#   3. wbflush with log=L: x reads A; write x=B, FLUSH; clean stop.
#   4. wbflush without log=: starts now.
#   5. The SSD is lost: hhc with L on a new cache: x must read B.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3 md5sum
hhc=$(filter)
make_tmpdir

export X=$(( 5 * 4096 ))
truncate -s 16M "$tmp/backend.img"
truncate -s 16M "$tmp/blank.log"

# gw_args CACHE ARGS...: set gw, the gateway on the backend with CACHE.
# No write-back (idle-ms=0, high watermarks): x stays dirty in step 1.
gw_args ()
{
  local c=$1
  shift
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/$c"
      cache-size=8M backend-id=log-modeswitch idle-ms=0 dirty-low=90
      dirty-high=95 "$@")
}

# refused REGEX GATEWAY-ARGS...: nbdkit must fail to start (exit by
# itself, at once), with an error matching REGEX, and leave the files
# unchanged.  (Not --run: its exit status is the command's.)
refused ()
{
  local regex=$1
  shift
  rm -f "$tmp/rsock"
  expect_fail_with "$regex" timeout 30 nbdkit -f -U "$tmp/rsock" "$@"
  (cd "$tmp" && md5sum -c --quiet sums) ||
    fail "a refused start changed a file: nbdkit $*"
}

prelude='
import os
x = int(os.environ["X"])
A, B = b"A" * 4096, b"B" * 4096
'

# 1.
gw_args cache.img mode=hhc log="$tmp/l.log" log="$tmp/l2.log" log-size=16M
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c 'h.pwrite(A, x); h.flush()'
stop_nbdkit "$tmp/pid"
cmp -s -i "$X:$X" -n 4096 "$tmp/backend.img" /dev/zero ||
  fail "test setup: x was written back in mode hhc"

# 2.
(cd "$tmp" && md5sum cache.img l.log l2.log blank.log >sums)
gw_args cache.img mode=wbflush
refused 'cache\.img.*log=|log=.*cache\.img' "${gw[@]}"
gw_args cache.img mode=wb log="$tmp/blank.log"
refused 'log' "${gw[@]}"
gw_args cache.img mode=wb log="$tmp/l.log" log="$tmp/blank.log"
refused 'had 2 mirrors.*1 of them given' "${gw[@]}"

# 3.
gw_args cache.img mode=wbflush log="$tmp/l.log" log="$tmp/l2.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c '
assert h.pread(4096, x) == A, "x lost its dirty block A"
h.pwrite(B, x)
h.flush()
'
stop_nbdkit "$tmp/pid"

# 4.
gw_args cache.img mode=wbflush
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c 'assert h.pread(4096, x) == B'
stop_nbdkit "$tmp/pid"

# 5.
rm -f "$tmp/cache.img"
gw_args cache2.img mode=hhc log="$tmp/l.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c '
assert h.pread(4096, x) == B, \
    "x does not read B after the SSD was lost: the old log of the hhc " \
    "run was replayed"
'
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
