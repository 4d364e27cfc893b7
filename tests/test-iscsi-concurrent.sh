#!/usr/bin/env bash
# hhciscsi: four clients at once, each writing its own quarter of the
# LUN and reading it back, with many requests in flight: on one session
# (the waiting requests take turns reading the replies for all) and over
# a pool of 3.  Every byte lands where it belongs and every read returns
# its own blocks.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 16M "$tmp/lun.img"
add_lun iqn.2026-01.test:concurrent "$tmp/lun.img"

# run SESSIONS FILL: client c writes 64 KiB blocks of byte FILL+c, each
# block's first 8 bytes its own offset, 64 writes in flight, then reads
# them back 64 at a time.
run ()
{
  local sessions=$1 fill=$2 c pids=()
  start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)" \
    "sessions=$sessions"
  for c in 0 1 2 3; do
    nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c "
c, fill = $c, $fill
base = c << 22
def block(off):
    return off.to_bytes(8, 'little') + bytes([fill + c]) * (65536 - 8)
bufs = []
for i in range(64):
    off = base + i * 65536
    bufs.append(h.aio_pwrite(nbd.Buffer.from_bytearray(block(off)), off))
while h.aio_in_flight() > 0:
    h.poll(-1)
h.flush()
reads = []
for i in range(64):
    b = nbd.Buffer(65536)
    reads.append((base + i * 65536, b, h.aio_pread(b, base + i * 65536)))
while h.aio_in_flight() > 0:
    h.poll(-1)
for off, b, cookie in reads:
    assert b.to_bytearray() == block(off), 'block at %d' % off
" &
    pids+=($!)
  done
  for c in "${pids[@]}"; do wait "$c" || fail "client $c failed (sessions=$sessions)"; done
  python3 -c "
with open('$tmp/expected.img', 'wb') as f:
    for c in range(4):
        for i in range(64):
            off = (c << 22) + i * 65536
            f.write(off.to_bytes(8, 'little') + bytes([$fill + c]) * (65536 - 8))"
  cmp "$tmp/expected.img" "$tmp/lun.img" ||
    fail "backing file differs (sessions=$sessions)"
  stop_nbdkit "$tmp/n.pid"
}

run 1 64
run 3 96
