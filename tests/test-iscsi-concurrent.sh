#!/usr/bin/env bash
# hhciscsi: four clients at once, each writing its own quarter of the
# LUN (many requests in flight over a pool of 3 sessions); every byte
# lands where it belongs.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 16M "$tmp/lun.img"
add_lun iqn.2026-01.test:concurrent "$tmp/lun.img"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)" sessions=3

pids=()
for c in 0 1 2 3; do
  nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c "
c = $c
base = c << 22
bufs = []
for i in range(64):
    b = nbd.Buffer.from_bytearray(bytearray([0x40 + c]) * 65536)
    bufs.append(h.aio_pwrite(b, base + i * 65536))
while h.aio_in_flight() > 0:
    h.poll(-1)
h.flush()
assert h.pread(1 << 22, base) == bytes([0x40 + c]) * (1 << 22)
" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "client $p failed"; done
python3 -c "
import sys
with open('$tmp/expected.img', 'wb') as f:
    for c in range(4):
        f.write(bytes([0x40 + c]) * (1 << 22))"
cmp "$tmp/expected.img" "$tmp/lun.img" || fail "backing file differs"
stop_nbdkit "$tmp/n.pid"
