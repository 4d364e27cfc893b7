#!/usr/bin/env bash
# cos plugin on s3rver: a new volume; patterns written at unaligned
# offsets (partial objects are read-modify-written) and read back; a
# whole object written with zeros and a whole object trimmed are
# deleted from the bucket, partial trims and zeroes leave zeros; the
# extents map shows the holes; the volume reopens with its recorded
# geometry and identity, and a conflicting size= is refused.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh nbdinfo
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

start_s3rver vol
read -r -a creds <<<"$(s3_creds)"
common=("$plugin" endpoint="$s3_endpoint" bucket="$s3_bucket" prefix=rt/ "${creds[@]}")
osize=65536

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${common[@]}" \
  create=true size=4M object-size=64K
uri=$(nbd_uri "$tmp/n.sock")

nbdinfo "$uri" >"$tmp/info"
grep -q 'export-size: 4194304' "$tmp/info" || fail "wrong size: $(cat "$tmp/info")"
desc=$(sed -n 's/^[[:space:]]*description: //p' "$tmp/info")
[[ $desc == "hhc-cos $s3_endpoint $s3_bucket rt "* ]] ||
  fail "unexpected export description: $desc"

# Random unaligned writes (seeded), each checked against a model of
# the whole volume; then zero and trim, whole and partial objects.
nbdsh -u "$uri" -c '
import random
rng = random.Random(20261202)
size = h.get_size()
osize = '"$osize"'
model = bytearray(size)
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
for i in range(60):
    n = rng.choice([1, 7, 511, 4096, 65536, 70000, 200000])
    off = rng.randrange(0, size - n)
    data = bytes([rng.randrange(1, 256)]) * n
    h.pwrite(data, off, nbd.CMD_FLAG_FUA if i % 5 == 0 else 0)
    model[off:off + n] = data
    assert h.pread(n, off) == data, (off, n)
# Make the objects of interest non-zero first.
for o in (2, 3, 10, 11):
    h.pwrite(b"\x5a" * osize, o * osize)
    model[o * osize:(o + 1) * osize] = b"\x5a" * osize
# Object 2: written whole with zeros; object 3: trimmed whole.
h.pwrite(bytes(osize), 2 * osize)
model[2 * osize:3 * osize] = bytes(osize)
h.trim(osize, 3 * osize)
model[3 * osize:4 * osize] = bytes(osize)
# Object 10: zeroed in part; objects 11 and 12: trimmed in part, one
# range across their boundary.
h.zero(1000, 10 * osize + 17)
model[10 * osize + 17:10 * osize + 1017] = bytes(1000)
h.pwrite(b"\x6b" * osize, 12 * osize)
model[12 * osize:13 * osize] = b"\x6b" * osize
h.trim(9000, 12 * osize - 4000)
model[12 * osize - 4000:12 * osize + 5000] = bytes(9000)
h.flush()
assert h.pread(size, 0) == bytes(model), "volume differs from the model"
open("'"$tmp/model.img"'", "wb").write(model)
'

# The bucket holds exactly the objects that are not all zeros.
python3 - "$tmp/model.img" "$osize" >"$tmp/expected.objects" <<'EOF'
import sys
model = open(sys.argv[1], "rb").read()
osize = int(sys.argv[2])
for i in range(len(model) // osize):
    if any(model[i * osize:(i + 1) * osize]):
        print("%016x" % i)
EOF
{ s3_objects rt/ | grep -v '^volume.json$' || :; } >"$tmp/actual.objects"
diff -u "$tmp/expected.objects" "$tmp/actual.objects" ||
  fail "objects in the bucket differ from the non-zero objects of the volume"
grep -q '^0000000000000002$' "$tmp/actual.objects" &&
  fail "an object written with zeros was stored"
grep -q '^0000000000000003$' "$tmp/actual.objects" &&
  fail "a trimmed object was not deleted"
grep -q '^000000000000000a$' "$tmp/actual.objects" ||
  fail "a partly zeroed object was deleted"

# Extents: data exactly where objects exist.
check_map ()
{
  nbdinfo --map --json "$uri" >"$tmp/map.json"
  python3 - "$tmp/map.json" "$tmp/expected.objects" "$osize" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
objs = {int(l, 16) for l in open(sys.argv[2]).read().split()}
osize = int(sys.argv[3])
for e in m:
    for o in range(e["offset"] // osize, (e["offset"] + e["length"]) // osize):
        hole = e["type"] & 1 == 1
        assert hole == (o not in objs), ("object", o, e)
EOF
}
check_map

stop_nbdkit "$tmp/n.pid"

# Reopen: geometry and identity come from volume.json.
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${common[@]}"
nbdinfo "$uri" >"$tmp/info2"
grep -q 'export-size: 4194304' "$tmp/info2" || fail "size not kept on reopen"
grep -q 'block_size_preferred: 65536' "$tmp/info2" ||
  fail "object size not kept on reopen"
desc2=$(sed -n 's/^[[:space:]]*description: //p' "$tmp/info2")
[ "$desc" = "$desc2" ] || fail "identity changed on reopen: $desc -> $desc2"
nbdsh -u "$uri" -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()"
# create=true on an existing volume opens it.
stop_nbdkit "$tmp/n.pid"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${common[@]}" create=true size=4M
nbdsh -u "$uri" -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()"
stop_nbdkit "$tmp/n.pid"

expect_fail_with 'size=8388608 conflicts with the volume.s recorded size 4194304' \
  timeout 60 nbdkit -f -U "$tmp/x.sock" "${common[@]}" size=8M
expect_fail_with 'object-size=1048576 conflicts' \
  timeout 60 nbdkit -f -U "$tmp/x.sock" "${common[@]}" object-size=1M
# Read-ahead: a sequential pass of 64 KiB reads on a cold cache reads
# the next objects ahead into the object cache; a partial write of an
# object read ahead (before it is read) is what the pass then sees.
# With readahead=0 nothing is read ahead, and the bytes are the same.
seqpass_py='
import sys
model = bytearray(open(sys.argv[1], "rb").read())
osz = int(sys.argv[2])
for i in range(0, len(model) // osz):
    if i == 8:
        patch = b"\x7e" * 1000
        h.pwrite(patch, 10 * osz + 333)
        model[10 * osz + 333:10 * osz + 1333] = patch
    got = h.pread(osz, i * osz)
    assert got == bytes(model[i * osz:(i + 1) * osz]), ("object", i)
open(sys.argv[1], "wb").write(model)
'
ra_stat ()
{
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$tmp/cos.json" "$1"
}
for ra in 4 0; do
  rm -f "$tmp/cos.json"
  start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${common[@]}" \
    readahead=$ra cos-stats="$tmp/cos.json"
  nbdsh -u "$uri" -c "import sys; sys.argv = ['', '$tmp/model.img', '$osize']" \
    -c "$seqpass_py"
  stop_nbdkit "$tmp/n.pid"
  n=$(ra_stat readahead_objects)
  if [ "$ra" -gt 0 ]; then
    [ "$n" -ge "$ra" ] || fail "readahead=$ra: $n objects read ahead"
    [ "$(ra_stat cache_hits)" -gt 0 ] ||
      fail "readahead=$ra: no read served from the objects read ahead"
  else
    [ "$n" -eq 0 ] || fail "readahead=0: $n objects read ahead"
  fi
done
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${common[@]}" object-cache=0
nbdsh -u "$uri" -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()"
stop_nbdkit "$tmp/n.pid"
echo "$_hhc_name: ok"
