#!/usr/bin/env bash
# Flushed data survives a SIGKILL of the gateway, in wb, wt, pt and hhc
# (with ssd-sync=flush and =checkpoint).
#
# Write several MiB (aligned and unaligned, zeroes too), FLUSH, then
# write 1 MiB more without a flush, and kill -9 nbdkit.  Restart on the
# same cache and backend: every flushed byte must read back exactly.
# The unflushed MiB may hold the old or the new data, but each 4 KiB
# block must be one or the other, never a mix or something else.
#
# hhc with ssd-sync=checkpoint: a FLUSH synced only the log
# (write-ahead), so the cache's metadata on disk does not name the
# flushed blocks: the restart must redo the log into the cache (its log
# says how many blocks), and a restart in another mode before that is
# refused, changing nothing.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdcopy nbdsh qemu-io python3 cmp
hhc=$(filter)
make_tmpdir

flushed=(
  'write -P 0xa1 1M 6M'
  'write -P 0xb2 12345 20000'
  'write -z 3M 64k'
  'write -P 0xc3 16M 4k'
  'flush'
)
unflushed_off=$((20 << 20))
unflushed_len=$((1 << 20))

head -c 32M /dev/urandom >"$tmp/orig.img"
cp "$tmp/orig.img" "$tmp/expected.img"
apply_ops "$tmp/expected.img" "${flushed[@]}"

qemu_args=()
for op in "${flushed[@]}"; do qemu_args+=(-c "$op"); done

# Check each 4 KiB block of the unflushed range in ACTUAL holds either
# the original bytes or 0xd4, then copy the range into EXPECTED-COPY.
unflushed_py='
import sys
orig, act, exp = sys.argv[1:4]
off, n = int(sys.argv[4]), int(sys.argv[5])
with open(orig, "rb") as o, open(act, "rb") as a:
    o.seek(off)
    a.seek(off)
    ob, ab = o.read(n), a.read(n)
for i in range(0, n, 4096):
    blk = ab[i:i + 4096]
    if blk != ob[i:i + 4096] and blk != b"\xd4" * 4096:
        sys.exit("%s: unflushed block at %d is neither old nor new data"
                 % (act, off + i))
with open(exp, "r+b") as e:
    e.seek(off)
    e.write(ab)
'

for mode in wb wt pt hhc hhc-ckpt; do
  d=$tmp/$mode
  mkdir "$d"
  cp "$tmp/orig.img" "$d/backend.img"
  gw=(--filter="$hhc" file "$d/backend.img"
      cache="$d/cache.img" cache-size=16M mode="${mode%-ckpt}"
      backend-id="kill9-$mode")
  case $mode in
    hhc) gw+=(log="$d/log.img" log-size=32M) ;;
    hhc-ckpt) gw+=(log="$d/log.img" log-size=32M ssd-sync=checkpoint) ;;
  esac
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  qemu_io_u "$d/sock" "${qemu_args[@]}" >/dev/null
  # Not qemu-io: it flushes when it closes the image.
  nbdsh_u "$d/sock" \
    -c "h.pwrite(b'\xd4' * $unflushed_len, $unflushed_off)"
  kill9_nbdkit "$d/pid"

  if [ "$mode" = hhc-ckpt ]; then
    cp "$d/cache.img" "$d/cache.before"
    cp "$d/backend.img" "$d/backend.before"
    # -f: the refusal comes after the fork, and would leave --run's
    # command waiting for a server that is gone.
    expect_fail_with 'hhc:.*ssd-sync=checkpoint, did not stop cleanly.*mode=wb refused' \
      timeout 60 nbdkit -f -U "$d/sock2" --filter="$hhc" \
        file "$d/backend.img" cache="$d/cache.img" mode=wb \
        backend-id="kill9-$mode"
    cmp "$d/cache.img" "$d/cache.before" ||
      fail "the refused start in mode wb changed the cache"
    cmp "$d/backend.img" "$d/backend.before" ||
      fail "the refused start in mode wb changed the backend"
  fi
  # -v: the core's start-up messages (nbdkit debug) go to the log.
  start_nbdkit -P "$d/pid" -U "$d/sock" -v "${gw[@]}"
  if [ "$mode" = hhc-ckpt ]; then
    # The start-up log of this nbdkit (functions.sh numbers them).
    grep -Eq 'redid [1-9][0-9]* blocks into the cache' \
         "$tmp/nbdkit-$_hhc_nlogs.log" ||
      fail "hhc-ckpt: no redo of the log into the cache after kill -9"
  fi
  nbdcopy "$(nbd_uri "$d/sock")" "$d/out.img"
  cp "$tmp/expected.img" "$d/expected.img"
  cp "$tmp/expected.img.discarded" "$d/expected.img.discarded"
  python3 -c "$unflushed_py" "$tmp/orig.img" "$d/out.img" "$d/expected.img" \
          "$unflushed_off" "$unflushed_len" ||
    fail "$mode: torn or foreign data in the unflushed range"
  compare_image "$d/expected.img" "$d/out.img"
  stop_nbdkit "$d/pid"
done
