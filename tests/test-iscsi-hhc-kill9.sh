#!/usr/bin/env bash
# The hhc filter in front of hhciscsi: flushed writes survive kill -9
# of the gateway and are read back after a restart; after a clean stop
# they are in the LUN's backing file.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp qemu-io python3
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
head -c 16M /dev/urandom >"$tmp/lun.img"
cp "$tmp/lun.img" "$tmp/expected.img"
add_lun iqn.2026-01.test:hhc "$tmp/lun.img"
gw=(--filter="$hhc" "$plugin" "$(tgt_url)" cache="$tmp/cache.img"
    cache-size=8M mode=wb backend-id=iscsi-test-lun)

ops=('write -P 0xa1 1M 3M' 'write -P 0xb2 12345 20000' 'write -z 5M 64k'
     'write -P 0xc3 9M 4k' 'flush')
args=()
for op in "${ops[@]}"; do args+=(-c "$op"); done
apply_ops "$tmp/expected.img" "${ops[@]}"

start_nbdkit -P "$tmp/1.pid" -U "$tmp/1.sock" "${gw[@]}"
qemu_io_u "$tmp/1.sock" "${args[@]}" >/dev/null
kill9_nbdkit "$tmp/1.pid"

start_nbdkit -P "$tmp/2.pid" -U "$tmp/2.sock" "${gw[@]}"
nbdsh -u "$(nbd_uri "$tmp/2.sock")" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/expected.img', 'rb').read()" ||
  fail "flushed data lost across kill -9"
stop_nbdkit "$tmp/2.pid"
