#!/usr/bin/env bash
# hhciscsi on a LUN with 4096-byte logical blocks, given as portal=,
# target= and lun= instead of url=: the plugin advertises 4096 as its
# minimum block size, and unaligned writes (read-modify-write of 4 KiB
# edge blocks) land byte for byte in the LUN's backing file.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh nbdinfo cmp python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
head -c 8M /dev/urandom >"$tmp/lun.img"
cp "$tmp/lun.img" "$tmp/expected.img"
tgt_blocksize=4096
add_lun iqn.2026-01.test:fourk "$tmp/lun.img"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" \
  portal="$tgt_portal" target="$tgt_iqn" lun=1 sessions=2

nbdinfo --json "$(nbd_uri "$tmp/n.sock")" >"$tmp/info.json"
python3 -c "
import json
e = json.load(open('$tmp/info.json'))['exports'][0]
assert e['block_size_minimum'] == 4096, e.get('block_size_minimum')
assert e['export-size'] == 8 << 20, e['export-size']
" || fail "the plugin does not advertise the LUN's 4096-byte blocks"

nbdsh -c "h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)" \
  -c "h.connect_uri('$(nbd_uri "$tmp/n.sock")')" \
  -c 'h.pwrite(b"\x11" * 1, 5000)' \
  -c 'h.pwrite(b"\x22" * 10000, 4095)' \
  -c 'h.pwrite(b"\x33" * 4096, 8192, nbd.CMD_FLAG_FUA)' \
  -c 'h.pwrite(b"\x44" * 700, (8 << 20) - 700)' \
  -c 'h.flush()'
apply_ops "$tmp/expected.img" "write -P 0x11 5000 1" \
  "write -P 0x22 4095 10000" "write -P 0x33 8192 4096" \
  "write -P 0x44 $(( (8 << 20) - 700 )) 700"
cmp "$tmp/expected.img" "$tmp/lun.img" ||
  fail "the LUN's backing file differs from the expected image"
stop_nbdkit "$tmp/n.pid"
