#!/usr/bin/env bash
# scripts/campaign/logscan, the crash campaign's check that every log
# entry holds its own LBA's block, on a real log: the hhc filter under
# hhc-verify's load writes it.  Clean, logscan passes.  With the data of
# two entries of one segment swapped (and the segment's checksum made
# right again, as a writer would have made it) it fails and names both.
# With the swap and the old checksum (a torn segment: a replay never
# reads it) it passes, and --torn lists the entries.  (Both blocks end
# with their own crc32c: a crc32c over the segment would not see the
# swap, XXH3 and segsum do.)
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit python3
# logscan checks XXH3 segments with Debian's python3-xxhash.
python3 -c 'import xxhash' 2>/dev/null || {
  [ -z "${CI:-}" ] || fail "python3's xxhash module is missing"
  echo "$0: SKIP: python3's xxhash module is missing" >&2
  exit 77
}
hhc=$(filter)
make_tmpdir
verify=$abs_top_builddir/tests/verify/hhc-verify
[ -x "$verify" ] || fail "$verify: not built"
logscan=$abs_top_srcdir/scripts/campaign/logscan

truncate -s 16M "$tmp/backend.img"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" --filter="$hhc" \
  file "$tmp/backend.img" cache="$tmp/cache.img" cache-size=8M mode=hhc \
  log="$tmp/log.img" log-size=8M backend-id=logscan
"$verify" write "$(nbd_uri "$tmp/n.sock")" "$tmp/journal" --writers 2 \
  --blocks 1024 --ops 600 --flush-every 4 --seed 11 >"$tmp/write.out" 2>&1 ||
  { cat "$tmp/write.out"; fail "the load failed"; }
stop_nbdkit "$tmp/n.pid"

"$logscan" "$tmp/log.img" >"$tmp/clean.out" ||
  { cat "$tmp/clean.out"; fail "logscan failed on a clean log"; }
grep -q ' 0 wrong in valid segments' "$tmp/clean.out" ||
  fail "unexpected summary: $(cat "$tmp/clean.out")"

# logscan's checksum is log-format.c's: every segment of this log (it
# never wrapped) has the checksum logscan computes, and the flag
# LOG_F_XXH3 (all 64 bits: 80 and 88).
LOGSCAN=$logscan python3 - "$tmp/log.img" <<'EOF' ||
import os, sys
img = open(sys.argv[1], "rb").read()
exec(open(os.environ["LOGSCAN"]).read().split("\ndef main")[0])
n = 0
for off, h in segments(img):
    seg = bytearray(img[off:off + h["hl"] + h["nb"] * 4096])
    seg[80:84] = b"\0\0\0\0"
    seg[88:92] = b"\0\0\0\0"
    assert h["flags"] & F_XXH3, h
    assert h["crc"] >> 32, h
    assert seg_checksum(h["flags"], bytes(seg)) == h["crc"], (off, h)
    n += 1
assert n > 10, n
EOF
  fail "logscan's segment checksum is not log-format.c's"

# Swap entries 0 and 1 of the first segment with two entries or more;
# FIXCRC: also write the crc of the new contents.
swap ()
{
  python3 - "$tmp/log.img" "$1" "$2" <<'EOF'
import os, struct, sys
img = bytearray(open(sys.argv[1], "rb").read())
out, fix = sys.argv[2], sys.argv[3] == "fix"
# logscan's format helpers (segments, seg_checksum), not its main.
exec(open(os.environ["LOGSCAN"]).read().split("\ndef main")[0])
for off, h in segments(img):
    if h["nb"] >= 2 and not h["flags"] & F_WRAP:
        break
else:
    sys.exit("no segment with two entries")
d = off + h["hl"]
a, b = img[d:d + 4096], img[d + 4096:d + 8192]
img[d:d + 4096], img[d + 4096:d + 8192] = b, a
if fix:
    seg = bytearray(img[off:d + h["nb"] * 4096])
    seg[80:84] = b"\0\0\0\0"
    seg[88:92] = b"\0\0\0\0"
    s = seg_checksum(h["flags"], bytes(seg))
    struct.pack_into("<I", img, off + 80, s & 0xFFFFFFFF)
    if h["flags"] & F_XXH3:
        struct.pack_into("<I", img, off + 88, s >> 32)
open(out, "wb").write(img)
print(h["seq"])
EOF
}
export LOGSCAN=$logscan
seq=$(swap "$tmp/swapped.img" fix)
st=0
"$logscan" --quiet "$tmp/swapped.img" >"$tmp/swapped.out" || st=$?
[ "$st" -eq 1 ] || fail "logscan exit status $st on a log with swapped entries"
for e in 0 1; do
  grep -q "^segment $seq .*crc valid) entry $e of .*holds LBA" "$tmp/swapped.out" ||
    { cat "$tmp/swapped.out"; fail "entry $e of segment $seq not reported"; }
done

swap "$tmp/torn.img" keep >/dev/null
"$logscan" "$tmp/torn.img" >"$tmp/torn.out" ||
  { cat "$tmp/torn.out"; fail "logscan failed on a torn segment"; }
grep -q ' 1 torn segment(s) with wrong entries' "$tmp/torn.out" ||
  fail "torn segment not counted: $(tail -1 "$tmp/torn.out")"
"$logscan" --torn --quiet "$tmp/torn.img" >"$tmp/torn-list.out" || true
grep -q "^segment $seq .*crc fails: torn" "$tmp/torn-list.out" ||
  fail "--torn did not list the torn segment's entries"

echo "$_hhc_name: ok"
