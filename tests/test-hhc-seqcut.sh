#!/usr/bin/env bash
# seq-cutoff=SIZE: a long sequential stream bypasses the cache.
#
# Bad values are refused with one error line naming the parameter.  A
# gateway in mode hhc (file backend, log) reads 8M sequentially in 64K
# requests, once without a cutoff and once with seq-cutoff=1M: with it
# the stats show far fewer cache fills (clean blocks) and the bypassed
# bytes.  Then, with the cutoff, a sequential write of 4M: it reads back
# whole, and after a FLUSH the bypassed part is in the backend file (a
# FLUSH flushes the backend after a bypassed write, even in hhc).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh python3 cmp
hhc=$(filter)
make_tmpdir

# ---- bad values ----
for v in bogus -1 1Q 4M4; do
  # shellcheck disable=SC2016 # nbdkit --run expands $uri
  expect_fail_with 'hhc:.*seq-cutoff' \
    nbdkit -U - --filter="$hhc" null 16M cache="$tmp/bad.img" \
           cache-size=16M backend-id=seqcut-test seq-cutoff="$v" \
           --run 'nbdinfo --size "$uri"'
done
[ ! -e "$tmp/bad.img" ] || fail "a refused seq-cutoff created the cache"

# STATS KEY: one integer from the stats file (empty if not there yet).
stat_of ()
{
  python3 -c 'import json, sys
try:
    print(json.load(open(sys.argv[1]))[sys.argv[2]])
except (OSError, ValueError, KeyError):
    pass' "$1" "$2"
}

# read_done STATS: the 8M read is counted.
read_done ()
{
  local b
  b=$(stat_of "$1" bytes_read)
  [ -n "$b" ] && [ "$b" -ge $(( 8 << 20 )) ]
}

# run NAME PARAMS...: a gateway, the sequential read; sets clean and
# bypass to the clean blocks and the bypassed read bytes it reports.
run ()
{
  local name=$1 d=$tmp/$1
  shift
  mkdir "$d"
  truncate -s 64M "$d/backend.img"
  start_nbdkit -P "$d/pid" -U "$d/sock" --filter="$hhc" \
               file "$d/backend.img" cache="$d/cache.img" cache-size=32M \
               log="$d/log.img" log-size=16M backend-id="seqcut-$name" \
               stats="$d/stats.json" "$@"
  nbdsh_u "$d/sock" -c '
for off in range(0, 8 << 20, 64 << 10):
    assert h.pread(64 << 10, off) == bytes(64 << 10)'
  poll_until 30 read_done "$d/stats.json" ||
    fail "$name: the stats never counted the read"
  clean=$(stat_of "$d/stats.json" clean)
  bypass=$(stat_of "$d/stats.json" seq_bypass_read_bytes)
}

run off
clean_off=$clean bypass_off=$bypass
stop_nbdkit "$tmp/off/pid"
run on seq-cutoff=1M
clean_on=$clean bypass_on=$bypass
echo "clean blocks: $clean_off without a cutoff, $clean_on with seq-cutoff=1M"
[ "$clean_off" -ge 2048 ] || fail "without a cutoff only $clean_off fills"
[ "$bypass_off" -eq 0 ] || fail "without a cutoff $bypass_off bytes bypassed"
# 1M (256 blocks) is filled before the stream passes the cutoff.
[ "$clean_on" -le 256 ] || fail "with seq-cutoff=1M, $clean_on fills"
[ "$bypass_on" -eq $(( 7 << 20 )) ] ||
  fail "with seq-cutoff=1M, $bypass_on bytes bypassed (expected 7M)"

# ---- a sequential write with the cutoff ----
d=$tmp/on
head -c $(( 4 << 20 )) /dev/urandom >"$tmp/data"
nbdsh_u "$d/sock" -c "
data = open('$tmp/data', 'rb').read()
for off in range(0, 4 << 20, 64 << 10):
    h.pwrite(data[off:off + (64 << 10)], (16 << 20) + off)
assert h.pread(4 << 20, 16 << 20) == data
h.flush()"
# Past the first 1M the write went to the backend, flushed.
cmp -s -i $(( 1 << 20 )):$(( (16 << 20) + (1 << 20) )) -n $(( 3 << 20 )) \
    "$tmp/data" "$d/backend.img" ||
  fail "the bypassed part of the write is not in the backend"
stop_nbdkit "$d/pid"
