#!/usr/bin/env bash
# hhcctl check trusts a cache metadata page exactly when the gateway
# does: both decide through the codec (gateway/cache-format.c), whose
# page check refuses a commit sequence of 2^62 or more (CACHE_MAX_SEQ,
# found by fuzz-cache).  hhcctl once checked pages with a copy of its
# own that lacked that limit.
#
#   one copy   After a clean stop in wb with dirty blocks, the older
#              copy of metadata page 0 becomes an all-free page with
#              sequence 2^62 and a right crc.  The gateway ignores it
#              and loads the newer copy; check counts the same dirty
#              blocks as the gateway loads (a check that trusted the
#              2^62 copy counted none) and is healthy.
#   late       The newer copy gets sequence 2^62 - 1 (valid, but the
#              next commit would need 2^62): the gateway refuses the
#              cache (any sequence past 2^61), and check says so.
#   state      (last) The newer state page copy gets 2^62 - 1: check
#              says the gateway refuses it, as well as the pages.
#   both       Both copies get sequence 2^62: the gateway
#              refuses to start (page 0 corrupt in both copies), and
#              check exits 1 saying the gateway refuses the cache.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh qemu-io python3
hhc=$(filter)
hhcctl=${abs_top_builddir:?}/appliance/hhcctl
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
make_tmpdir
d=$tmp

truncate -s 16M "$d/backend.img"
gw=(--filter="$hhc" file "$d/backend.img" cache="$d/cache.img"
    cache-size=16M mode=wb dirty-low=90 dirty-high=95
    backend-id=hhcctl-maxseq-test stats="$d/stats.json")

start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_u "$d/sock" -c 'write -P 0xa1 0 256k' -c flush >/dev/null
stop_nbdkit "$d/pid"

# forge_py CACHE WHICH: give the older copy of metadata page 0 (WHICH
# older: and no entries, all free) or both copies (both: the newer
# one's entries) the sequence 2^62, or the newer copy 2^62 - 1 (late),
# and a right crc32c.
export LOGSCAN=$abs_top_srcdir/scripts/campaign/logscan
forge_py='
import struct, sys
path, which = sys.argv[1], sys.argv[2]
import os
# the crc32c of scripts/campaign/logscan (its helpers, not its main).
exec(open(os.environ["LOGSCAN"]).read().split("\ndef main")[0])
_crc32c = crc32c
def crc32c(b):
    return _crc32c(0, b)
def valid_seq(pg):
    magic, p, seq = struct.unpack_from("<IIQ", pg, 0)
    crc = struct.unpack_from("<I", pg, 24)[0]
    z = pg[:24] + b"\0\0\0\0" + pg[28:]
    return seq if magic == 0x504D4848 and p == 0 and crc32c(z) == crc else 0
with open(path, "r+b") as f:
    sb = f.read(4096)
    if which == "state":
        # the newer of the two state copies (after the superblock)
        st = []
        for o in (4096, 8192):
            f.seek(o)
            st.append(bytearray(f.read(4096)))
        i = 0 if struct.unpack_from("<Q", st[0], 8)[0] >= struct.unpack_from("<Q", st[1], 8)[0] else 1
        pg = st[i]
        struct.pack_into("<Q", pg, 8, (1 << 62) - 1)
        struct.pack_into("<I", pg, 24, 0)
        struct.pack_into("<I", pg, 24, crc32c(bytes(pg)))
        f.seek(4096 * (i + 1))
        f.write(pg)
        sys.exit(0)
    npages, meta_off = struct.unpack_from("<IQ", sb, 60)
    offs = [meta_off, meta_off + npages * 4096]
    pgs = []
    for o in offs:
        f.seek(o)
        pgs.append(bytearray(f.read(4096)))
    seqs = [valid_seq(p) for p in pgs]
    newer = 0 if seqs[0] >= seqs[1] else 1
    if seqs[newer] == 0 or seqs[newer] >= 1 << 62:
        sys.exit("no valid newer copy of page 0: %r" % seqs)
    pg = bytearray(pgs[newer])
    if which == "older":
        pg[32:] = bytes(4096 - 32)
    struct.pack_into("<Q", pg, 8, (1 << 62) - (which == "late"))
    struct.pack_into("<I", pg, 24, 0)
    struct.pack_into("<I", pg, 24, crc32c(bytes(pg)))
    copies = {"older": [1 - newer], "late": [newer], "both": [0, 1]}
    for i in copies[which]:
        f.seek(offs[i])
        f.write(pg)
'

# --- one copy: the gateway and check both use the other -----------------

python3 -c "$forge_py" "$d/cache.img" older || fail "could not forge page 0"
st=0
"$hhcctl" check --cache "$d/cache.img" >"$d/check.out" 2>&1 || st=$?
cat "$d/check.out"
[ "$st" -eq 0 ] || fail "check with a 2^62 older copy: exit $st, not 0"
checked=$(sed -n 's/.*metadata pages: \([0-9]*\) dirty.*/\1/p' "$d/check.out")

rm -f -- "$d/stats.json"
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
poll_until 30 test -s "$d/stats.json" || fail "no stats file"
loaded=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["dirty"])' \
  "$d/stats.json")
stop_nbdkit "$d/pid"
echo "check counted ${checked:-?} dirty blocks, the gateway loaded $loaded"
[ "$loaded" -gt 0 ] || fail "the gateway loaded no dirty blocks"
[ "${checked:-x}" = "$loaded" ] ||
  fail "check counted ${checked:-no} dirty blocks, the gateway loaded $loaded"

# expect_refused WHAT SOCK GATEWAY-ERROR CHECK-ERROR: the gateway does
# not start and says GATEWAY-ERROR; check exits 1 with an error line
# "cache PATH: CHECK-ERROR" (both grep patterns).
expect_refused ()
{
  local what=$1 sock=$2 gwerr=$3 ckerr=$4 st=0
  timeout 60 nbdkit -f -U "$d/$sock" "${gw[@]}" </dev/null >/dev/null \
    2>"$d/refused.err" || st=$?
  cat "$d/refused.err"
  if [ "$st" -eq 0 ] || [ "$st" -eq 124 ] ||
     ! grep -q -- "$gwerr" "$d/refused.err"; then
    fail "the gateway did not refuse $what ($st)"
  fi
  st=0
  "$hhcctl" check --cache "$d/cache.img" >"$d/check.out" 2>&1 || st=$?
  cat "$d/check.out"
  [ "$st" -eq 1 ] || fail "check with $what: exit $st, not 1"
  grep -q -- "^error: cache .*: $ckerr" "$d/check.out" ||
    fail "check does not say that the gateway refuses $what"
}

# --- the newer copy at 2^62 - 1: the gateway refuses, so does check -----

python3 -c "$forge_py" "$d/cache.img" late || fail "could not forge page 0"
expect_refused "page 0 at 2^62 - 1" lsock \
  'commit sequence 4611686018427387903 is past 2^61' \
  '1 metadata pages have a commit sequence past 2^61 (the first is page 0): the gateway refuses to load the cache'

# --- both copies: the gateway refuses, so does check --------------------

python3 -c "$forge_py" "$d/cache.img" both || fail "could not forge page 0"
expect_refused "page 0 with 2^62 in both copies" rsock \
  'metadata page 0 is corrupt in both copies' \
  '1 metadata pages have no valid copy (the first is page 0): the gateway refuses to load the cache'

# --- the newer state copy at 2^62 - 1: check reports it beside the pages --

# (The gateway stops at page 0 first; test-cache-format's test_seq_near_max
# has it refuse such a state page alone.)
python3 -c "$forge_py" "$d/cache.img" state || fail "could not forge the state page"
expect_refused "a state page at 2^62 - 1" ssock \
  'metadata page 0 is corrupt in both copies' \
  "the state page's sequence 4611686018427387903 is past 2^61: the gateway refuses to load the cache"
grep -q '1 metadata pages have no valid copy' "$d/check.out" ||
  fail "check stopped at the state page"
echo ok
