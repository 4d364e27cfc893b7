#!/usr/bin/env bash
# hhcctl check, format and mttdl on the devices of a real gateway.
#
#   check    after writes, flushes and a clean stop, the cache and both
#            log mirrors are healthy (exit 0).  With a data byte of a
#            segment in the middle of mirror a.log flipped, check exits
#            1 and names the damaged segment, the later intact barrier
#            and the mirror that is behind; so does a check of a.log
#            alone, while b.log alone is healthy.  check changes no
#            byte of any device (md5sum).
#   format   refuses the cache (dirty blocks) and the log (data to
#            replay) without --force, changing nothing; with --force
#            the devices are blank, check says so, and the next start
#            formats them: an empty cache that serves the backend's
#            data.
#   mttdl    the defaults give HHC-1 > RAID5 and HHC-2 > RAID6 (--json);
#            a bad option is a usage error (exit 2).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io python3 md5sum
hhc=$(filter)
hhcctl=${abs_top_builddir:?}/appliance/hhcctl
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
make_tmpdir
d=$tmp

head -c 32M /dev/urandom >"$d/backend.img"
cp "$d/backend.img" "$d/orig.img"
devs=("$d/cache.img" "$d/a.log" "$d/b.log")
gw=(--filter="$hhc" file "$d/backend.img" cache="$d/cache.img"
    cache-size=16M mode=hhc log="$d/a.log" log="$d/b.log" log-size=16M
    dirty-low=90 dirty-high=95 backend-id=hhcctl-check-test
    stats="$d/stats.json")

# check ARGS...: run hhcctl check, output in $d/check.out, status in $st.
check ()
{
  st=0
  "$hhcctl" check "$@" >"$d/check.out" 2>&1 || st=$?
  cat "$d/check.out"
}

expect_in_output ()
{
  grep -Eq -- "$1" "$d/check.out" ||
    fail "hhcctl check output does not match /$1/"
}

# --- a healthy gateway's devices ----------------------------------------

start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
qemu_io_u "$d/sock" \
  -c 'write -P 0xa1 0 256k' -c flush \
  -c 'write -P 0xb2 1M 512k' -c flush \
  -c 'write -P 0xc3 4M 128k' -c flush \
  -c 'write -P 0xd4 8M 64k' -c flush >/dev/null
stop_nbdkit "$d/pid"

check --cache "$d/cache.img" --log "$d/a.log" --log "$d/b.log"
[ "$st" -eq 0 ] || fail "check of a healthy gateway's devices: exit $st"
expect_in_output '^check: healthy'
expect_in_output 'log and cache are paired'
expect_in_output '[1-9][0-9]* dirty'

# --- a damaged segment in the middle of mirror a.log --------------------

# Flip a byte in the data of the middle segment (by sequence number) of
# the log on PATH; print its sequence number.
corrupt_py='
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    d = f.read()
    segs = []
    for off in range(65536, len(d) - 4096 + 1, 4096):
        if d[off:off + 8] == b"HHCSEG01":
            seq, base, flags, nb, nr, hl = struct.unpack_from("<QQIIII", d, off + 8)
            if nb > 0:
                segs.append((seq, off, nb, hl))
    segs.sort()
    if len(segs) < 3:
        sys.exit("%s: fewer than three segments with data: %r" % (path, segs))
    seq, off, nb, hl = segs[(len(segs) - 1) // 2]
    pos = off + hl + (nb // 2) * 4096 + 77
    f.seek(pos)
    f.write(bytes([d[pos] ^ 0x5a]))
    print(seq)
'
seq=$(python3 -c "$corrupt_py" "$d/a.log") ||
  fail "could not find a segment to damage"
echo "damaged segment $seq of a.log"
md5sum "${devs[@]}" >"$d/before.md5"

check --cache "$d/cache.img" --log "$d/a.log" --log "$d/b.log"
[ "$st" -eq 1 ] || fail "check with a damaged segment: exit $st, not 1"
expect_in_output "^error: log .*a\.log: segment $seq at offset [0-9]+ is damaged"
expect_in_output "later segments? .* intact, among them barrier"
expect_in_output "^error: log mirror .*a\.log is behind"
expect_in_output '^check: [0-9]+ problems? found'

check --log "$d/a.log"
[ "$st" -eq 1 ] || fail "check of the damaged mirror alone: exit $st, not 1"
expect_in_output "segment $seq at offset [0-9]+ is damaged"

check --log "$d/b.log"
[ "$st" -eq 0 ] || fail "check of the intact mirror alone: exit $st, not 0"

md5sum --quiet -c "$d/before.md5" || fail "hhcctl check changed a device"

# Usage errors: one line naming the option, exit 2.
for args in "--cache" "--bogus x" "" "--cache a --cache b"; do
  st=0
  # shellcheck disable=SC2086 # the words are the arguments
  "$hhcctl" check $args 2>"$d/usage.err" || st=$?
  [ "$st" -eq 2 ] || fail "hhcctl check $args: exit $st, not 2"
  [ "$(wc -l <"$d/usage.err")" -eq 1 ] ||
    fail "hhcctl check $args: not one line: $(cat "$d/usage.err")"
done

# --- format -------------------------------------------------------------

expect_fail_with 'holds [0-9]+ dirty blocks.*without --force' \
  "$hhcctl" format --cache "$d/cache.img" --log "$d/a.log" --log "$d/b.log"
expect_fail_with 'log on .*b\.log holds [0-9]+ blocks.*without --force' \
  "$hhcctl" format --log "$d/b.log"
md5sum --quiet -c "$d/before.md5" || fail "a refused format changed a device"

"$hhcctl" format --force --cache "$d/cache.img" \
  --log "$d/a.log" --log "$d/b.log"
check --cache "$d/cache.img" --log "$d/a.log" --log "$d/b.log"
[ "$st" -eq 0 ] || fail "check after format: exit $st"
expect_in_output 'cache .*: blank'
expect_in_output '^log: blank'

# The next start formats them: an empty cache over the backend, which
# never got the dirty data (the log was discarded too).
rm -f -- "$d/stats.json"
start_nbdkit -P "$d/pid" -U "$d/sock" "${gw[@]}"
poll_until 30 test -s "$d/stats.json" || fail "no stats file"
python3 - "$d/stats.json" <<'EOF' || fail "the cache is not empty after format"
import json, sys
st = json.load(open(sys.argv[1]))
assert st["dirty"] == 0 and st["clean"] == 0, st
assert st["free"] == st["slots"], st
EOF
nbdsh_u "$d/sock" -c 'h.pread(32 << 20, 0)' >/dev/null
stop_nbdkit "$d/pid"
cmp "$d/orig.img" "$d/backend.img" || fail "the backend changed"

# --- mttdl --------------------------------------------------------------

"$hhcctl" mttdl
"$hhcctl" mttdl --json >"$d/mttdl.json"
python3 - "$d/mttdl.json" <<'EOF' || fail "mttdl: the paper's ordering"
import json, sys
m = {r["name"]: r["mttdl_years"] for r in json.load(open(sys.argv[1]))["models"]}
print(m)
assert m["HHC-1"] > m["RAID5"], m
assert m["HHC-2"] > m["RAID6"], m
assert m["SSD"] < m["RAID5"], m
EOF
st=0
"$hhcctl" mttdl --disks 2 2>"$d/usage.err" || st=$?
if [ "$st" -ne 2 ] || ! grep -q -- '--disks' "$d/usage.err"; then
  fail "mttdl --disks 2: exit $st: $(cat "$d/usage.err")"
fi
echo "ok"
