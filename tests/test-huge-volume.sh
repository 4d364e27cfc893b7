#!/usr/bin/env bash
# A volume of 2^34 blocks of 4 KiB (64 TiB, the largest the cache
# indexes) reads, writes, trims and zeroes right up to its end.
#
# The backend is a sparse 64 TiB file on tmpfs (/dev/shm: ext4 files
# stop at 16 TiB), or nbdkit's memory plugin where /dev/shm is not
# tmpfs, served by an nbdkit of its own so that it outlives the
# gateway's restarts; the gateway reaches it with the nbd plugin and
# has a 1 GiB sparse cache file (and a log file in mode hhc).
#
# In every mode (hhc, wb, wbflush, wt, pt), with nbdsh:
#   - a pattern at the last block, the last byte, a write straddling
#     the last two blocks, and blocks whose numbers need more than 32
#     bits (2^32 must not alias block 0) read back;
#   - reads, writes, zeros and trims beyond the end fail (client-side
#     checks off, so the server answers) and change nothing;
#   - zero and trim over ranges ending at the last block read back as
#     zeros, the block before them unchanged;
#   - block status over the start and the end covers the range asked
#     for and calls no written block a hole;
#   - a zero and a trim over the whole volume (4 GiB requests) read
#     back as zeros: their times are printed (no threshold).
# In modes hhc and wb, dirty blocks near the end survive kill -9 (the
# cache metadata's LBA fields); in hhc also the loss of the cache, the
# log then writing them to the backend (the log records' LBA fields).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh timeout
hhc=$(filter)
make_tmpdir

if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  be_file=$(mktemp /dev/shm/hhc-huge.XXXXXX)
  cleanup_fn rm -f "$be_file"
  truncate -s 64T "$be_file"
  be=(file "$be_file")
else
  be=(memory size=64T)
fi
start_nbdkit -P "$tmp/be.pid" -U "$tmp/be.sock" "${be[@]}"

# gateway MODE: set gw, the gateway of MODE over the backend.
gateway ()
{
  local d=$tmp/$1
  mkdir -p "$d"
  gw=(--filter="$hhc" nbd socket="$tmp/be.sock" cache="$d/cache.img"
      cache-size=1G mode="$1" backend-id="huge-$1")
  [ "$1" != hhc ] || gw+=(log="$d/log.img" log-size=64M)
}

# The checks, run by nbdsh on the gateway (h).
checks_py='
import os, time
B = 4096
S = h.get_size()
assert S == (1 << 34) * B, S
mode = os.environ["MODE"]
h.set_strict_mode(0)  # let the server judge requests beyond the end

def pat(c, n=B):
    return bytes([c]) * n

def expect(off, data, what):
    got = h.pread(len(data), off)
    assert got == data, "%s: %s at %d differs" % (mode, what, off)

# Last block, last byte, straddling the last two blocks.
h.zero(2 * B, S - 2 * B)
h.pwrite(pat(0xa5), S - B)
expect(S - B, pat(0xa5), "last block")
h.pwrite(b"\x5a", S - 1)
expect(S - B, pat(0xa5, B - 1) + b"\x5a", "last byte")
h.pwrite(pat(0x33, 6000), S - B - 3000)
tail = pat(0, B - 3000) + pat(0x33, 6000) + pat(0xa5, B - 3001) + b"\x5a"
expect(S - 2 * B, tail, "write over the last two blocks")

# Block numbers of 32 bits and more.
high = {0: 0x01, (1 << 32) - 1: 0x02, 1 << 32: 0x03, (1 << 33) + 12345: 0x04,
        (1 << 34) - 3: 0x05}
for lba, c in high.items():
    h.pwrite(pat(c), lba * B)
for lba, c in high.items():
    expect(lba * B, pat(c), "block %d" % lba)

# Beyond the end: every request fails and changes nothing.
for off, n in ((S, 1), (S - 1, 2), (S - B, B + 1), (S + B, B), (S, B)):
    for what, op in (("write", lambda: h.pwrite(pat(0xee, n), off)),
                     ("read", lambda: h.pread(n, off)),
                     ("zero", lambda: h.zero(n, off)),
                     ("trim", lambda: h.trim(n, off))):
        try:
            op()
        except nbd.Error:
            continue
        raise AssertionError("%s: %s of %d at %d succeeded" % (mode, what, n, off))
expect(S - 2 * B, tail, "the end after requests beyond it")

# Extents over the start and the end: they cover what was asked for
# and call no written block a hole.
for off, n in ((0, 1 << 20), (S - (1 << 20), 1 << 20)):
    ext = []
    h.block_status(n, off, lambda m, o, e, err: ext.extend(e) or 0)
    assert ext and sum(ext[0::2]) >= n, (mode, off, ext)
    pos = off
    for length, flags in zip(ext[0::2], ext[1::2]):
        for lba in high:
            if pos <= lba * B < pos + length:
                assert flags & nbd.STATE_HOLE == 0, (mode, lba, flags)
        pos += length
# Zero and trim over ranges ending at the last block.
h.pwrite(pat(0x77), S - 9 * B)
h.zero(8 * B, S - 8 * B)
expect(S - 9 * B, pat(0x77) + pat(0, 8 * B), "zero of the last 8 blocks")
h.pwrite(pat(0x66, 2 * B), S - 2 * B)
h.zero(B + 100, S - B - 100)
expect(S - 2 * B, pat(0x66, B - 100) + pat(0, B + 100), "unaligned zero")
h.pwrite(pat(0x44, 4 * B), S - 4 * B)
h.trim(4 * B, S - 4 * B)
expect(S - 9 * B, pat(0x77) + pat(0, 8 * B), "trim of the last 4 blocks")
h.flush()

# The whole volume, in requests of 4 GiB - 4 KiB.
def whole(op):
    for lba, c in high.items():
        h.pwrite(pat(c), lba * B)
    h.pwrite(pat(0x99), S - B)
    t = time.monotonic()
    step = (1 << 32) - B
    for off in range(0, S, step):
        op(min(step, S - off), off)
    h.flush()
    dt = time.monotonic() - t
    for lba in list(high) + [(1 << 34) - 1]:
        expect(lba * B, pat(0), "block %d after the whole-volume %s"
               % (lba, op.__name__))
    return dt

tz, tt = whole(h.zero), whole(h.trim)
print("%s: whole 64 TiB: zero %.2f s, trim %.2f s (%d requests each)"
      % (mode, tz, tt, -(-S // ((1 << 32) - B))))

# What the restart checks look for: dirty blocks near the end.
for lba, c in high.items():
    h.pwrite(pat(c ^ 0xff), lba * B)
h.pwrite(pat(0xc7), S - B)
h.flush()
'

# The blocks the restart checks expect (written last by checks_py).
after_py='
B = 4096
S = h.get_size()
high = {0: 0x01, (1 << 32) - 1: 0x02, 1 << 32: 0x03, (1 << 33) + 12345: 0x04,
        (1 << 34) - 3: 0x05}
for lba, c in high.items():
    assert h.pread(B, lba * B) == bytes([c ^ 0xff]) * B, lba
assert h.pread(B, S - B) == b"\xc7" * B
'

for mode in hhc wb wbflush wt pt; do
  gateway "$mode"
  d=$tmp/$mode
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  MODE=$mode timeout 120 nbdsh --base-allocation -u "$(nbd_uri "$d/sock")" -c "$checks_py" ||
    fail "$mode: the checks failed"
  case $mode in
    hhc|wb)
      # Flushed dirty blocks come back from the cache after kill -9.
      kill9_nbdkit "$d/pid"
      start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
      nbdsh_u "$d/sock" -c "$after_py" ||
        fail "$mode: the blocks near the end are lost after kill -9"
      ;;
  esac
  if [ "$mode" = hhc ]; then
    # The cache is lost: the log brings the blocks back to the backend.
    kill9_nbdkit "$d/pid"
    rm -f "$d/cache.img"
    start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
    stop_nbdkit "$d/pid"
    nbdsh_u "$tmp/be.sock" -c "$after_py" ||
      fail "hhc: the log did not bring the blocks near the end back"
  else
    stop_nbdkit "$d/pid"
  fi
done
