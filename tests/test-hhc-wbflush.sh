#!/usr/bin/env bash
# FLUSH writes back: mode wbflush, and mode hhc once no log is healthy.
#
# wbflush       write + FLUSH, and a FUA write without a flush, then
#               kill -9: the backend image already holds both (cmp),
#               without any restart of the gateway.
# The next parts put a log mirror on a file that fails on demand: an
# nbdkit export (memory plugin, error filter with error-file=) mounted
# as a file with nbdfuse.  They are skipped if FUSE does not work here.
# hhc-one-left  mirrors: a good file and the failing one.  Write +
#               FLUSH, make the mirror fail, write + FLUSH: the flush
#               succeeds, the stats mark that mirror failed, nothing is
#               written back; kill -9, delete the cache, restart with
#               the good log: the backend holds both flushes.
# hhc-none-left the failing mirror only.  Write + FLUSH (logged), make
#               it fail, write + FLUSH: with no healthy log FLUSH falls
#               back to wbflush, so after kill -9 the backend already
#               holds both flushes (no restart).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io python3 cmp
hhc=$(filter)
make_tmpdir

head -c 32M /dev/urandom >"$tmp/orig.img"

first=(
  'write -P 0xa1 1M 1M'
  'write -P 0xb2 12345 20000'
  'flush'
)
second=(
  'write -P 0xc3 1536k 64k'
  'write -P 0xd4 8M 4k'
  'flush'
)

# gateway DIR MODE ARGS...: set gw, the gateway in DIR.
gateway ()
{
  local d=$1 mode=$2
  shift 2
  gw=(--filter="$hhc" file "$d/backend.img" cache="$d/cache.img"
      cache-size=16M mode="$mode" dirty-low=90 dirty-high=95
      backend-id=wbflush-test stats="$d/stats.json" "$@")
}

qemu_io_ops ()
{
  local sock=$1 op
  local -a a=()
  shift
  for op in "$@"; do a+=(-c "$op"); done
  qemu_io_u "$sock" "${a[@]}" >/dev/null
}

# new_case NAME: d=$tmp/NAME with a fresh backend.
new_case ()
{
  d=$tmp/$1
  mkdir "$d"
  cp "$tmp/orig.img" "$d/backend.img"
  cp "$tmp/orig.img" "$d/expected.img"
}

# --- wbflush -----------------------------------------------------------
new_case wbflush
gateway "$d" wbflush
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_ops "$d/sock" "${first[@]}" "${second[@]}"
nbdsh_u "$d/sock" -c "h.pwrite(b'\xf5' * 8192, 24 << 20, nbd.CMD_FLAG_FUA)"
kill9_nbdkit "$d/pid"
apply_ops "$d/expected.img" "${first[@]}" "${second[@]}" 'write -P 0xf5 24M 8k'
compare_image "$d/expected.img" "$d/backend.img"
echo "wbflush: ok"

# --- a log mirror that fails on demand -----------------------------------

# fuse_log NAME: $tmp/NAME.mnt/log, a 16 MiB file whose writes fail
# with EIO once $tmp/NAME.inject exists.  Returns 1 if FUSE is not
# usable here.
fuse_log ()
{
  local n=$1 pid
  mkdir "$tmp/$n.mnt"
  start_nbdkit -P "$tmp/$n.pid" -U "$tmp/$n.sock" --filter=error \
               memory 16M error-pwrite=EIO error-pwrite-rate=100% \
               error-file="$tmp/$n.inject"
  nbdfuse "$tmp/$n.mnt/log" --unix "$tmp/$n.sock" </dev/null \
          >"$tmp/$n.fuse.log" 2>&1 &
  pid=$!
  cleanup_fn stop_fuse "$pid" "$tmp/$n.mnt"
  poll_until 10 test -f "$tmp/$n.mnt/log" 2>/dev/null
}

# stop_fuse PID MNT: stop nbdfuse (it unmounts on SIGTERM).
gone ()
{
  ! kill -0 "$1" 2>/dev/null
}
stop_fuse ()
{
  local pid=$1 mnt=$2
  kill "$pid" 2>/dev/null || true
  poll_until 30 gone "$pid" || kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if grep -qF " $mnt " /proc/mounts; then
    umount -l "$mnt" || return 1
  fi
}

# mirror_failed FILE N: the stats in FILE show mirror N failed.
mirror_failed ()
{
  python3 - "$1" "$2" 2>/dev/null <<'EOF'
import json, sys
lg = json.load(open(sys.argv[1]))["log"]
assert lg["mirror"][int(sys.argv[2])]["failed"] and lg["mirrors_failed"] == 1
EOF
}

if ! command -v nbdfuse >/dev/null || [ ! -c /dev/fuse ] ||
   ! fuse_log one || ! fuse_log none; then
  echo "SKIP: the failing-mirror parts: FUSE (nbdfuse, /dev/fuse) does not work here"
  exit 0
fi

# --- hhc, one of two mirrors fails ----------------------------------------
new_case hhc-one-left
gateway "$d" hhc log="$d/good.log" log="$tmp/one.mnt/log" log-size=16M
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_ops "$d/sock" "${first[@]}"
touch "$tmp/one.inject"
qemu_io_ops "$d/sock" "${second[@]}"
poll_until 30 mirror_failed "$d/stats.json" 1 ||
  fail "hhc-one-left: the stats do not show the failed mirror"
kill9_nbdkit "$d/pid"
cmp -s -i 1M:1M -n 1M "$d/backend.img" "$tmp/orig.img" ||
  fail "hhc-one-left: data was written back (one log was still healthy)"
grep -q "log mirror .*one.mnt/log failed" "$tmp"/nbdkit-*.log ||
  fail "hhc-one-left: no error message about the failed mirror"
rm -- "$d/cache.img"
gateway "$d" hhc log="$d/good.log"
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
stop_nbdkit "$d/pid"
apply_ops "$d/expected.img" "${first[@]}" "${second[@]}"
compare_image "$d/expected.img" "$d/backend.img"
echo "hhc-one-left: ok"

# --- hhc, the only mirror fails -------------------------------------------
new_case hhc-none-left
gateway "$d" hhc log="$tmp/none.mnt/log"
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_ops "$d/sock" "${first[@]}"
cmp -s -i 1M:1M -n 1M "$d/backend.img" "$tmp/orig.img" ||
  fail "hhc-none-left: data was written back while the log was healthy"
touch "$tmp/none.inject"
qemu_io_ops "$d/sock" "${second[@]}"
kill9_nbdkit "$d/pid"
apply_ops "$d/expected.img" "${first[@]}" "${second[@]}"
compare_image "$d/expected.img" "$d/backend.img"
echo "hhc-none-left: ok"
