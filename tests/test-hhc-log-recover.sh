#!/usr/bin/env bash
# Mode hhc: the SSD cache is lost, the HDD log brings the backend back.
#
# Every case writes through the gateway with dirty-low/high so high
# that nothing is written back, FLUSHes, kills nbdkit with SIGKILL,
# deletes the cache file and starts again with a new cache and the old
# log: the gateway replays the log into the backend before serving.
# After a clean stop the backend image is compared with cmp.
#
#   single      one log; flushed writes (aligned, unaligned, zeroes,
#               more than one segment) then 1 MiB written without a
#               flush: every flushed byte is in the backend, each
#               unflushed 4 KiB block holds the old or the new data;
#               a FUA write (no flush after it) is there too.
#   mirror-*    the same with two mirrors, one deleted before the
#               restart: restarted with a new blank file in its place
#               (it joins the log) or with the surviving mirror only.
#   hhcctl-*    the same loss replayed offline by hhcctl recover (two
#               mirrors; or one, into the backend through nbdkit); a
#               backend smaller than the volume is refused, unchanged.
#   corrupt-*   write + flush, write + flush, then damage the last
#               segment on the log (a data byte, or its LBA table):
#               the backend is exactly the state of the first barrier.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io python3 cmp
hhc=$(filter)
hhcctl=${abs_top_builddir:?}/appliance/hhcctl
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
make_tmpdir

head -c 32M /dev/urandom >"$tmp/orig.img"

# gateway DIR LOG...: set gw, the gateway in DIR with these log files.
gateway ()
{
  local d=$1 l
  shift
  gw=(--filter="$hhc" file "$d/backend.img" cache="$d/cache.img"
      cache-size=16M mode=hhc log-size=16M dirty-low=90 dirty-high=95
      backend-id=log-recover-test stats="$d/stats.json")
  for l in "$@"; do gw+=(log="$d/$l"); done
}

# qemu_io_ops SOCK OP...: send qemu-io style ops to the gateway.
qemu_io_ops ()
{
  local sock=$1 op
  local -a a=()
  shift
  for op in "$@"; do a+=(-c "$op"); done
  qemu_io_u "$sock" "${a[@]}" >/dev/null
}

# expected DIR OP...: DIR/expected.img is orig.img with OPs applied.
expected ()
{
  local d=$1
  shift
  cp "$tmp/orig.img" "$d/expected.img"
  apply_ops "$d/expected.img" "$@"
}

# not_written_back DIR OFF LEN: the range still holds the original
# bytes in the backend (so only the replay can bring the new data).
not_written_back ()
{
  cmp -s -i "$2:$2" -n "$3" "$1/backend.img" "$tmp/orig.img" ||
    fail "$1: $2+$3 was written back before the restart (test setup)"
}

# Check each 4 KiB block of the unflushed range of ACTUAL holds either
# the original bytes or 0xd4, then copy the range into EXPECTED.
unflushed_py='
import sys
orig, act, exp = sys.argv[1:4]
off, n = int(sys.argv[4]), int(sys.argv[5])
with open(orig, "rb") as o, open(act, "rb") as a:
    o.seek(off)
    a.seek(off)
    ob, ab = o.read(n), a.read(n)
new = 0
for i in range(0, n, 4096):
    blk = ab[i:i + 4096]
    if blk == b"\xd4" * 4096:
        new += 1
    elif blk != ob[i:i + 4096]:
        sys.exit("%s: unflushed block at %d is neither old nor new data"
                 % (act, off + i))
print("unflushed range: %d of %d blocks new" % (new, n // 4096))
with open(exp, "r+b") as e:
    e.seek(off)
    e.write(ab)
'

flushed=(
  'write -P 0xa1 1M 2M'
  'write -P 0xb2 12345 20000'
  'write -z 3M 64k'
  'write -P 0xc3 8M 4k'
  'write -P 0xc4 31M 12k'
  'flush'
)
fua_off=$((24 << 20))
unflushed_off=$((20 << 20))
unflushed_len=$((1 << 20))

# crashed NAME "LOGS": d=$tmp/NAME, its backend after the flushed ops,
# a FUA write and an unflushed 1 MiB through a gateway on LOGS, killed
# with SIGKILL (nothing written back); its cache file deleted.
crashed ()
{
  d=$tmp/$1
  mkdir "$d"
  cp "$tmp/orig.img" "$d/backend.img"
  expected "$d" "${flushed[@]}" "write -P 0xf5 $fua_off 8k"

  # shellcheck disable=SC2086 # word splitting of the log list
  gateway "$d" $2
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  qemu_io_ops "$d/sock" "${flushed[@]}"
  # A FUA write is durable by itself; then the unflushed one (not
  # qemu-io: it flushes when it closes the image).
  nbdsh_u "$d/sock" \
    -c "h.pwrite(b'\xf5' * 8192, $fua_off, nbd.CMD_FLAG_FUA)" \
    -c "h.pwrite(b'\xd4' * $unflushed_len, $unflushed_off)"
  kill9_nbdkit "$d/pid"
  not_written_back "$d" $((1 << 20)) $((2 << 20))
  not_written_back "$d" $((8 << 20)) 4096
  not_written_back "$d" "$fua_off" 8192
  rm -f -- "$d/cache.img" "$d/stats.json"
}

# replayed NAME: d's backend holds every flushed byte, and each block
# of the unflushed range the old or the new data.
replayed ()
{
  python3 -c "$unflushed_py" "$tmp/orig.img" "$d/backend.img" \
          "$d/expected.img" "$unflushed_off" "$unflushed_len" ||
    fail "$1: torn or foreign data in the unflushed range"
  compare_image "$d/expected.img" "$d/backend.img"
}

# recover NAME "LOGS-BEFORE" "DELETED" "LOGS-AFTER" [MIRRORS-AFTER]
recover ()
{
  local name=$1 deleted=$3 after=$4 mirrors=${5:-} l
  crashed "$name" "$2"
  for l in $deleted; do rm -- "$d/$l"; done
  # shellcheck disable=SC2086
  gateway "$d" $after
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  stop_nbdkit "$d/pid"
  replayed "$name"
  if [ -n "$mirrors" ]; then
    python3 - "$d/stats.json" "$mirrors" <<'EOF' || fail "$name: stats"
import json, sys
lg = json.load(open(sys.argv[1]))["log"]
want = int(sys.argv[2])
assert lg["mirrors"] == want and lg["mirrors_failed"] == 0, lg
assert len(lg["mirror"]) == want, lg
assert not any(m["failed"] for m in lg["mirror"]), lg
EOF
  fi
  echo "$name: ok"
}

# recover_offline NAME file|nbd "LOGS": the same loss, replayed by
# hhcctl recover (every mirror given) into the backend as a file or
# through nbdkit on a unix socket; then hhcctl refuses a backend
# smaller than the volume, in one line, leaving it unchanged.
recover_offline ()
{
  local name=$1 how=$2 l st=0 backend
  local -a logs=()
  crashed "$name" "$3"
  for l in $3; do logs+=(--log "$d/$l"); done
  backend=$d/backend.img
  if [ "$how" = nbd ]; then
    start_nbdkit -P "$d/be.pid" -U "$d/be.sock" file "$d/backend.img"
    backend="nbd+unix:///?socket=$d/be.sock"
  fi
  "$hhcctl" recover "${logs[@]}" --backend "$backend" --quiet ||
    fail "$name: hhcctl recover failed"
  [ "$how" != nbd ] || stop_nbdkit "$d/be.pid"
  replayed "$name"

  truncate -s 16M "$d/small.img"
  "$hhcctl" recover "${logs[@]}" --backend "$d/small.img" --quiet \
    2>"$d/small.err" || st=$?
  [ "$st" -eq 1 ] && [ "$(wc -l <"$d/small.err")" -eq 1 ] &&
    grep -q "refusing" "$d/small.err" ||
    fail "$name: a small backend: exit $st: $(cat "$d/small.err")"
  cmp -s "$d/small.img" <(head -c 16M /dev/zero) ||
    fail "$name: the refused backend was changed"
  echo "$name: ok"
}

recover single "log" "" "log"
recover mirror-new-blank "a.log b.log" "a.log" "a.log b.log" 2
recover mirror-survivor "a.log b.log" "a.log" "b.log" 1
recover mirror-second-lost "a.log b.log" "b.log" "a.log" 1
recover_offline hhcctl-file file "a.log b.log"
recover_offline hhcctl-nbd nbd "log"

# --- the last segment is corrupt ---------------------------------------

first=(
  'write -P 0xa1 1M 2M'
  'write -P 0xb2 12345 20000'
  'write -P 0xc3 8M 4k'
  'flush'
)
second=(
  'write -P 0xe5 1536k 64k'
  'write -P 0xe6 12288 4096'
  'write -P 0xe7 16M 256k'
  'flush'
)

# Damage the segment with the highest sequence number in the log; it
# must be the one of the second flush (it holds LBA 16M / 4K).  WHAT is
# data (flip a byte of its last data block) or lbas (of its LBA table).
corrupt_py='
import struct, sys
path, what, want_lba = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "r+b") as f:
    d = f.read()
    segs = []
    for off in range(65536, len(d) - 4096 + 1, 4096):
        if d[off:off + 8] == b"HHCSEG01":
            seq, base, flags, nb, nr, hl = struct.unpack_from("<QQIIII", d, off + 8)
            segs.append((seq, off, flags, nb, hl))
    if len(segs) < 2:
        sys.exit("%s: fewer than two segments: %r" % (path, segs))
    seq, off, flags, nb, hl = max(segs)
    lbas = struct.unpack_from("<%dQ" % nb, d, off + 96)
    if not flags & 1 or want_lba not in lbas:
        sys.exit("%s: the last segment (seq %d at %d, flags %d) is not the"
                 " barrier of the second flush: LBAs %r" % (path, seq, off, flags, lbas))
    if what == "data":
        pos = off + hl + (nb - 1) * 4096 + 123
    else:
        pos = off + 96 + 8 * (nb - 1)
    f.seek(pos)
    f.write(bytes([d[pos] ^ 0x5a]))
    print("corrupted byte %d of segment seq %d at %d (%d blocks)" % (pos, seq, off, nb))
'

corrupt ()
{
  local name=corrupt-$1 d
  d=$tmp/$name
  mkdir "$d"
  cp "$tmp/orig.img" "$d/backend.img"
  expected "$d" "${first[@]}"

  gateway "$d" log
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  qemu_io_ops "$d/sock" "${first[@]}"
  qemu_io_ops "$d/sock" "${second[@]}"
  kill9_nbdkit "$d/pid"
  not_written_back "$d" $((1 << 20)) $((2 << 20))
  not_written_back "$d" $((16 << 20)) $((256 << 10))

  python3 -c "$corrupt_py" "$d/log" "$1" $(((16 << 20) / 4096)) ||
    fail "$name: could not find the last segment"
  rm -f -- "$d/cache.img"
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  stop_nbdkit "$d/pid"
  compare_image "$d/expected.img" "$d/backend.img"
  echo "$name: ok"
}

corrupt data
corrupt lbas
