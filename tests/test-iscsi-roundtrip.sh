#!/usr/bin/env bash
# hhciscsi: patterns written at unaligned offsets (read-modify-write of
# the edge blocks), with and without FUA, read back through the plugin
# and found byte for byte in the LUN's backing file after a flush.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
head -c 16M /dev/urandom >"$tmp/lun.img"
cp "$tmp/lun.img" "$tmp/expected.img"
add_lun iqn.2026-01.test:roundtrip "$tmp/lun.img"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=10

# Unaligned writes: OFF LEN PATTERN [fua].  qemu-io style ops for the
# expected image are applied alongside.
ops=(
  '1 100 0x11'
  '511 2 0x22'
  '4095 8194 0x33 fua'
  '1048576 65536 0x44'
  '3000000 777 0x55 fua'
  '16776000 1216 0x66'
)
py='h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
h.connect_uri(uri)
import sys
for op in ops:
    w = op.split()
    off, n, pat = int(w[0]), int(w[1]), int(w[2], 0)
    fl = nbd.CMD_FLAG_FUA if len(w) > 3 else 0
    h.pwrite(bytes([pat]) * n, off, fl)
    assert h.pread(n, off) == bytes([pat]) * n, op
    # the bytes just around the write are untouched
    if off > 0:
        assert h.pread(1, off - 1) == exp[off - 1:off], op
h.flush()
'
nbdsh -c "uri = '$(nbd_uri "$tmp/n.sock")'" \
  -c "ops = $(printf '%s\n' "${ops[@]}" | python3 -c 'import sys; print([l.strip() for l in sys.stdin])')" \
  -c "exp = open('$tmp/expected.img', 'rb').read()" \
  -c "$py"

for op in "${ops[@]}"; do
  read -r off n pat _ <<<"$op"
  apply_ops "$tmp/expected.img" "write -P $pat $off $n"
done
cmp "$tmp/expected.img" "$tmp/lun.img" ||
  fail "the LUN's backing file differs from the expected image"

# Whole-image read through the plugin matches too.
nbdsh -u "$(nbd_uri "$tmp/n.sock")" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/expected.img', 'rb').read()"
stop_nbdkit "$tmp/n.pid"
