#!/usr/bin/env bash
# The cache persists across a clean restart and serves reads by itself.
#
# The second start puts nbdkit's error filter below ours with
# error-pread-rate=100%: every read that reaches the backend fails.
# Blocks cached before the restart must still read back correctly, and
# a block never cached must fail to read (proving the error filter is
# really in the path).  The file plugin has no export description and
# the error filter passes it through, but backend-id= pins the identity
# so the cache is accepted whatever the stack below reports.
#
# Round wb: blocks written in wb mode, dirty when the gateway stops.
# Round clean: blocks written in wb mode then written back by a wt
# start, plus blocks only ever read (cached clean on a read miss).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io
hhc=$(filter)
make_tmpdir

# Reads through the gateway whose backend now fails every read.
# OFF LEN PATTERN triples in $CACHED: each range must read back as
# that byte, or, with pattern "orig", as the bytes of $ORIG there.
# $UNCACHED: an offset never read nor written: its read must fail.
check_py='
import os
orig = open(os.environ["ORIG"], "rb")
for r in os.environ["CACHED"].split(","):
    off, n, pat = r.split()
    off, n = int(off), int(n)
    if pat == "orig":
        orig.seek(off)
        want = orig.read(n)
    else:
        want = bytes([int(pat, 0)]) * n
    got = h.pread(n, off)
    assert got == want, "cached range %d+%d does not read back" % (off, n)
try:
    h.pread(4096, int(os.environ["UNCACHED"]))
except nbd.Error:
    pass
else:
    raise AssertionError("read of an uncached block did not fail:"
                         " is the error filter below the gateway?")
'

# gateway DIR MODE [MORE-ARGS...]: set gw, the gateway in DIR.
gateway ()
{
  local d=$1 mode=$2
  shift 2
  gw=(--filter="$hhc" "$@" file "$d/backend.img" cache="$d/cache.img"
      cache-size=16M mode="$mode" backend-id=persist-test)
}

# with_failing_reads DIR MODE: the same gateway, reads below it fail.
with_failing_reads ()
{
  gateway "$1" "$2" --filter=error
  gw+=(error-pread-rate=100%)
}

# --- round wb: dirty blocks -------------------------------------------
d=$tmp/wb
mkdir "$d"
head -c 16M /dev/urandom >"$d/backend.img"
cp "$d/backend.img" "$d/orig.img"

gateway "$d" wb
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_u "$d/sock" -c 'write -P 0x5a 1M 2M' -c 'write -P 0x6b 8M 4k' \
          -c flush >/dev/null
stop_nbdkit "$d/pid"

with_failing_reads "$d" wb
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
ORIG=$d/orig.img CACHED="1048576 2097152 0x5a,8388608 4096 0x6b" \
UNCACHED=$((12 << 20)) nbdsh_u "$d/sock" -c "$check_py" ||
  fail "wb: dirty blocks did not persist"
stop_nbdkit "$d/pid"

# --- round clean: written back, and read-only cached -------------------
d=$tmp/clean
mkdir "$d"
head -c 16M /dev/urandom >"$d/backend.img"
cp "$d/backend.img" "$d/orig.img"

gateway "$d" wb
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_u "$d/sock" -c 'write -P 0x7c 1M 2M' -c flush >/dev/null
stop_nbdkit "$d/pid"

# The wt start writes the dirty blocks back; then read 4M..5M once.
gateway "$d" wt
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
nbdsh_u "$d/sock" -c 'h.pread(1 << 20, 4 << 20)'
stop_nbdkit "$d/pid"
cmp -s -i 1M:0 -n 2M "$d/backend.img" <(head -c 2M /dev/zero | tr '\0' '\174') ||
  fail "clean: the wt start did not write the dirty blocks back"

with_failing_reads "$d" wt
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
ORIG=$d/orig.img CACHED="1048576 2097152 0x7c,4194304 1048576 orig" \
UNCACHED=$((12 << 20)) nbdsh_u "$d/sock" -c "$check_py" ||
  fail "clean: written-back or read-cached blocks did not persist"
stop_nbdkit "$d/pid"
