#!/usr/bin/env bash
# hhcctl check takes a log superblock as the gateway does: both decide
# through the codec (log_sb_decode_mirror, gateway/log-format.c), which
# reads the two copies of a mirror's superblock.  hhcctl once called a
# mirror blank by the magic of the copies alone.
#
# A gateway in mode hhc (one log mirror) takes writes and stops
# cleanly; each case starts again from those devices, with the log's
# superblock copies changed:
#   version    every copy with the log's magic gets version 3 (newer than this build) and a
#              right crc32c: the gateway refuses the log (corrupt
#              superblock), and check exits 1 saying so.
#   void       a void superblock over one copy, the other still valid
#              (voiding is one 8 KiB write: a crash may tear it
#              there): a void copy wins, the gateway takes the mirror
#              for blank and starts; check says blank (and that the
#              cache was paired with a log not on these devices), no
#              problem, exit 0.  hhcctl once opened the log and said
#              it was voided: a problem, exit 1.
#   torn-void  a void superblock with a wrong crc32c over the older
#              copy: it counts for nothing, the newer copy decides;
#              the gateway starts with the log, and check finds the
#              log healthy and paired.
#   mark       the void mark (at 8 KiB: a void writes and syncs it
#              before the copies) of the newer copy's generation, both
#              copies intact: void, as for "void".
#   stale-mark a void mark older than the copies (the mirror joined the
#              log again since): it counts for nothing, as "torn-void".
# check changes no byte (md5sum); the gateway serves what was written.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh qemu-io python3 md5sum
hhc=$(filter)
hhcctl=${abs_top_builddir:?}/appliance/hhcctl
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
make_tmpdir
d=$tmp

truncate -s 16M "$d/backend.img"
gw=(--filter="$hhc" file "$d/backend.img" cache="$d/cache.img"
    cache-size=16M mode=hhc log="$d/a.log" log-size=16M
    dirty-low=90 dirty-high=95 backend-id=hhcctl-logsb-test)

start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_u "$d/sock" -c 'write -P 0xa1 0 256k' -c flush \
  -c 'write -P 0xb2 1M 128k' -c flush >/dev/null
stop_nbdkit "$d/pid"
for f in backend.img cache.img a.log; do cp "$d/$f" "$d/saved-$f"; done

# forge_py LOG HOW: change the superblock copies of LOG (see above).
export LOGSCAN=$abs_top_srcdir/scripts/campaign/logscan
forge_py='
import struct, sys
path, how = sys.argv[1], sys.argv[2]
import os
# the crc32c of scripts/campaign/logscan (its helpers, not its main).
exec(open(os.environ["LOGSCAN"]).read().split("\ndef main")[0])
_crc32c = crc32c
def crc32c(b):
    return _crc32c(0, b)
def seal(c):
    struct.pack_into("<I", c, 4092, crc32c(bytes(c[:4092])))
def generation(c):
    ok = (c[:8] == b"HHCLOG01" and struct.unpack_from("<I", c, 8)[0] in (1, 2)
          and crc32c(bytes(c[:4092])) == struct.unpack_from("<I", c, 4092)[0])
    return struct.unpack_from("<Q", c, 88)[0] if ok else -1
with open(path, "r+b") as f:
    b = f.read(8192)
    cs = [bytearray(b[:4096]), bytearray(b[4096:])]
    gens = [generation(c) for c in cs]
    newer = 0 if gens[0] >= gens[1] else 1
    if gens[newer] < 0:
        sys.exit("no valid superblock copy")
    void = bytearray(4096)
    void[:8] = b"HHCVOID1"
    struct.pack_into("<I", void, 8, 1)
    void[16:48] = cs[newer][16:48]
    seal(void)
    if how == "version":
        for c in cs:
            if c[:8] == b"HHCLOG01":
                struct.pack_into("<I", c, 8, 3)
                seal(c)
    elif how == "void":
        cs[newer] = void
    elif how == "torn-void":
        void[20] ^= 1
        cs[1 - newer] = void
    elif how in ("mark", "stale-mark"):
        struct.pack_into("<Q", void, 88,
                         gens[newer] - (how == "stale-mark"))
        seal(void)
        f.seek(8192)
        f.write(void)
    else:
        sys.exit("forge: " + how)
    f.seek(0)
    f.write(cs[0] + cs[1])
'

# prepare HOW: the saved devices, the log's superblocks forged.
prepare ()
{
  for f in backend.img cache.img a.log; do cp "$d/saved-$f" "$d/$f"; done
  python3 -c "$forge_py" "$d/a.log" "$1" || fail "could not forge ($1)"
}

# check: hhcctl check of the cache and the log, output in $d/check.out,
# status in $st; it must change no byte.
check ()
{
  md5sum "$d/cache.img" "$d/a.log" >"$d/before.md5"
  st=0
  "$hhcctl" check --cache "$d/cache.img" --log "$d/a.log" \
    >"$d/check.out" 2>&1 || st=$?
  cat "$d/check.out"
  md5sum --quiet -c "$d/before.md5" || fail "hhcctl check changed a device"
}

expect_in_output ()
{
  grep -Eq -- "$1" "$d/check.out" ||
    fail "hhcctl check output does not match /$1/"
}

# serves: the gateway starts on the devices and reads what was written.
serves ()
{
  start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
  qemu_io_u "$d/sock" -c 'read -P 0xa1 0 256k' -c 'read -P 0xb2 1M 128k' \
    >"$d/read.out" || fail "the gateway does not serve the data ($1)"
  ! grep -q 'Pattern verification failed' "$d/read.out" ||
    fail "the gateway serves other data ($1)"
  stop_nbdkit "$d/pid"
}

# --- version: the gateway refuses, so does check -------------------------

prepare version
check
[ "$st" -eq 1 ] || fail "check with log version 3: exit $st, not 1"
expect_in_output 'superblock is corrupt \(bad checksum or version\)'
expect_in_output '^check: [0-9]+ problems? found'
st=0
timeout 60 nbdkit -f -U "$d/rsock" "${gw[@]}" </dev/null >/dev/null \
  2>"$d/refused.err" || st=$?
cat "$d/refused.err"
if [ "$st" -eq 0 ] || [ "$st" -eq 124 ] ||
   ! grep -q 'superblock is corrupt (bad checksum or version)' \
     "$d/refused.err"; then
  fail "the gateway did not refuse log version 3 ($st)"
fi

# --- void: a void copy wins; blank to both -------------------------------

prepare void
check
[ "$st" -eq 0 ] || fail "check with a void copy: exit $st, not 0"
expect_in_output '^log: blank'
expect_in_output '^warning: the cache was paired with log .*, which is not on these devices'
serves void

# --- torn-void: it counts for nothing; the newer copy decides ------------

prepare torn-void
check
[ "$st" -eq 0 ] || fail "check with a torn void copy: exit $st, not 0"
expect_in_output 'log and cache are paired'
expect_in_output '^check: healthy'
serves torn-void

# --- mark: the void mark of the newest generation voids the mirror ------

prepare mark
check
[ "$st" -eq 0 ] || fail "check with a void mark: exit $st, not 0"
expect_in_output '^log: blank'
serves mark

# --- stale-mark: a mark older than the copies counts for nothing --------

prepare stale-mark
check
[ "$st" -eq 0 ] || fail "check with a stale void mark: exit $st, not 0"
expect_in_output 'log and cache are paired'
expect_in_output '^check: healthy'
serves stale-mark
echo ok
