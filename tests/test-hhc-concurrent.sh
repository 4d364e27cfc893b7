#!/usr/bin/env bash
# Concurrent writers on separate connections do not lose or mix blocks.
#
# wb mode.  Four nbdsh processes, each on its own connection, write
# interleaved 4 KiB blocks (writer i owns the blocks with number % 4 ==
# i) with up to 16 writes in flight, then FLUSH.  A fresh connection
# then reads the whole export: each block must hold its writer's
# pattern (which names the block and the writer), the rest zeroes.
# Round 1: everything fits in the cache.  Round 2: the cache holds a
# sixth of the data and write-back starts early, so writers stall,
# blocks are written back and evicted while others are being written.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh timeout
hhc=$(filter)
make_tmpdir

writers=4

# Block B written by writer W: its number and writer, then a fill byte.
block_py='
import struct
def block(b, w):
    return struct.pack("<QQ", b, w) + bytes([0x40 + w]) * (4096 - 16)
'

writer_py=$block_py'
import os
w, span, n = int(os.environ["W"]), int(os.environ["SPAN"]), int(os.environ["N"])
cookies, bufs = [], []
for b in range(w, span // 4096, n):
    while h.aio_in_flight() >= 16:
        h.poll(-1)
    buf = nbd.Buffer.from_bytearray(bytearray(block(b, w)))
    bufs.append(buf)
    cookies.append(h.aio_pwrite(buf, b * 4096))
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)  # raises nbd.Error if the write failed
h.flush()
'

reader_py=$block_py'
import os
span, n = int(os.environ["SPAN"]), int(os.environ["N"])
size = h.get_size()
step = 1 << 20
for off in range(0, size, step):
    data = h.pread(min(step, size - off), off)
    for i in range(0, len(data), 4096):
        b = (off + i) // 4096
        want = block(b, b % n) if b * 4096 < span else bytes(4096)
        got = data[i:i + 4096]
        if got != want:
            j = next(j for j in range(4096) if got[j] != want[j])
            raise AssertionError("block %d byte %d: got 0x%02x, want 0x%02x"
                                 % (b, j, got[j], want[j]))
'

# round NAME SPAN FILTER-ARGS...
round ()
{
  local name=$1 span=$2 d=$tmp/$1 i uri bad=0
  local -a pids=()
  shift 2
  mkdir "$d"
  truncate -s 32M "$d/backend.img"
  start_nbdkit -P "$d/pid" -U "$d/sock" --filter="$hhc" \
               file "$d/backend.img" cache="$d/cache.img" mode=wb \
               backend-id="concurrent-$name" "$@"
  uri=$(nbd_uri "$d/sock")
  for (( i = 0; i < writers; i++ )); do
    W=$i SPAN=$span N=$writers timeout 120 nbdsh -u "$uri" -c "$writer_py" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[i]}"; then
      echo "$_hhc_name: $name: writer $i failed" >&2
      bad=1
    fi
  done
  [ "$bad" -eq 0 ] || fail "$name: a writer failed"
  SPAN=$span N=$writers timeout 120 nbdsh -u "$uri" -c "$reader_py" ||
    fail "$name: data read back differs"
  stop_nbdkit "$d/pid"
}

round big $((8 << 20)) cache-size=32M
round small $((16 << 20)) cache-size=3M dirty-low=5 dirty-high=10
