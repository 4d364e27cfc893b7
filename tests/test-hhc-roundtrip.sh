#!/usr/bin/env bash
# Data written through the gateway reads back exactly, in every mode.
#
# For pt, wt and wb: apply a fixed list of writes (aligned, unaligned,
# one byte, zeroes, discards, one bigger than the cache) with qemu-io,
# apply the same list to a copy of the original image, and compare the
# whole export with that copy.  In pt and wt the backend file must then
# hold the same bytes.  In wb, a clean stop keeps the dirty blocks: the
# restarted gateway serves the same image, and a wt start writes every
# leftover back, after which the backend file matches too.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdcopy qemu-io python3 cmp
hhc=$(filter)
make_tmpdir

size=64M
ops=(
  'write -P 0x11 0 64k'
  'write -P 0x22 4097 10000'
  'write -P 0x77 12345 1'
  'write -P 0x33 1M 3M'
  'write -z 100k 8k'
  'write -P 0x44 8M 64k'
  'discard 8M 64k'
  'write -P 0x55 16M 16k'
  'discard 16777220 5000'
  'write -P 0x88 40M 20M'
  'write -P 0x66 67104765 4099'
  'write -P 0x99 2M 4k'
  'flush'
)

head -c "$size" /dev/urandom >"$tmp/orig.img"
cp "$tmp/orig.img" "$tmp/expected.img"
apply_ops "$tmp/expected.img" "${ops[@]}"

qemu_args=()
for op in "${ops[@]}"; do qemu_args+=(-c "$op"); done

# gateway DIR MODE: set gw to the arguments of the gateway kept in DIR.
gateway ()
{
  gw=(--filter="$hhc" file "$1/backend.img"
      cache="$1/cache.img" cache-size=16M mode="$2"
      backend-id="roundtrip-${1##*/}")
}

for mode in pt wt wb; do
  d=$tmp/$mode
  mkdir "$d"
  cp "$tmp/orig.img" "$d/backend.img"
  gateway "$d" "$mode"
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  qemu_io_u "$d/sock" "${qemu_args[@]}" >/dev/null
  nbdcopy "$(nbd_uri "$d/sock")" "$d/out.img"
  compare_image "$tmp/expected.img" "$d/out.img"
  if [ "$mode" != wb ]; then
    compare_image "$tmp/expected.img" "$d/backend.img"
  fi
done

# wb: a clean stop with dirty blocks, then the same gateway again.
d=$tmp/wb
stop_nbdkit "$d/pid"
gateway "$d" wb
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
nbdcopy "$(nbd_uri "$d/sock")" "$d/out2.img"
compare_image "$tmp/expected.img" "$d/out2.img"
stop_nbdkit "$d/pid"

# A wt start writes back what wb left dirty before it serves.
gateway "$d" wt
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
stop_nbdkit "$d/pid"
compare_image "$tmp/expected.img" "$d/backend.img"
