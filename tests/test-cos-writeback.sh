#!/usr/bin/env bash
# cos plugin write-back (the default) on s3rver: an acknowledged write
# is seen at once by another connection and by the extents map, before
# any FLUSH; what a FLUSH or a FUA covered survives kill -9; what was
# written without a FLUSH is stored on a clean exit (SIGTERM); a write
# into an object that is being stored is not lost.  Then the hhc filter
# (mode wb) in front: once it reports no dirty block, kill -9, and the
# cos plugin alone reads every write (the filter flushed the plugin
# before it called a block clean).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh nbdinfo python3
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

start_s3rver vol
read -r -a creds <<<"$(s3_creds)"
cos=("$plugin" endpoint="$s3_endpoint" bucket="$s3_bucket" prefix=wb "${creds[@]}"
     object-size=64K)
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" create=true \
  size=4M cos-stats="$tmp/cos.json"
uri=$(nbd_uri "$tmp/n.sock")
truncate -s 4M "$tmp/model.img"

# PY: nbdsh code with MODEL (the volume's model, a bytearray saved at
# the end), osz, and w(data, off, flags) that writes and models.
prelude='
import nbd
osz = 65536
path = "'"$tmp/model.img"'"
model = bytearray(open(path, "rb").read())
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
def w(data, off, flags=0):
    h.pwrite(data, off, flags)
    model[off:off + len(data)] = data
'
save='open(path, "wb").write(model)'

# Writes across objects 0-9 and into hole object 20, no FLUSH: a second
# connection reads them, and the map shows object 20 as data.  Then
# 200 small writes into objects 0-3, which are being stored meanwhile.
nbdsh -u "$uri" -c "$prelude" -c '
import random
rng = random.Random(20261204)
for i in range(40):
    n = rng.choice([1, 700, 4096, 70000])
    off = rng.randrange(0, 10 * osz - n)
    w(bytes([rng.randrange(1, 256)]) * n, off)
w(b"\x20" * 5000, 20 * osz + 123)
h2 = nbd.NBD()
h2.connect_uri("'"$uri"'")
assert h2.pread(len(model), 0) == bytes(model), "another connection differs"
for i in range(200):
    off = rng.randrange(0, 4 * osz - 512)
    w(bytes([rng.randrange(1, 256)]) * 512, off)
assert h2.pread(len(model), 0) == bytes(model), "lost a write into an object being stored"
h2.shutdown()
' -c "$save"
nbdinfo --map --json "$uri" >"$tmp/map.json"
python3 - "$tmp/map.json" <<'EOF' || fail "the map shows an unflushed object as a hole"
import json, sys
osz = 65536
for e in json.load(open(sys.argv[1])):
    if e["offset"] <= 20 * osz < e["offset"] + e["length"]:
        assert e["type"] & 1 == 0, e
        break
else:
    raise SystemExit("object 20 not in the map")
EOF

# FLUSH, then FUA writes into objects 30-31; object 40 written last
# without either.  kill -9: all but object 40 must be in the store.
nbdsh -u "$uri" -c "$prelude" -c '
h.flush()
w(b"\x30" * 80000, 30 * osz + 1000, nbd.CMD_FLAG_FUA)
' -c "$save"
cp "$tmp/model.img" "$tmp/durable.img"
nbdsh -u "$uri" -c "$prelude" -c 'w(b"\x40" * 3000, 40 * osz)' -c "$save"
kill9_nbdkit "$tmp/n.pid"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" \
  cos-stats="$tmp/cos.json"
nbdsh -u "$uri" -c '
osz = 65536
want = open("'"$tmp/durable.img"'", "rb").read()
got = h.pread(h.get_size(), 0)
assert got[:40 * osz] == want[:40 * osz], "flushed or FUA data lost across kill -9"
assert got[41 * osz:] == want[41 * osz:], "data lost across kill -9"
'
# Whatever object 40 holds now is the model's from here on.
nbdsh -u "$uri" -c "$prelude" -c '
model[40 * osz:41 * osz] = h.pread(osz, 40 * osz)
w(b"\x50" * 9000, 50 * osz + 77)
' -c "$save"
stop_nbdkit "$tmp/n.pid"
python3 -c 'import json, sys
st = json.load(open(sys.argv[1]))
assert st["writeback_stores"] >= 1 and st["writeback_failures"] == 0, st' \
  "$tmp/cos.json" || fail "write-back statistics: $(cat "$tmp/cos.json")"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}"
nbdsh -u "$uri" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()" ||
  fail "writes without a FLUSH were not stored at a clean exit"
stop_nbdkit "$tmp/n.pid"

# The hhc filter (wb) in front: write, let it write everything back,
# kill -9, and read through the plugin alone.
start_nbdkit -P "$tmp/g.pid" -U "$tmp/g.sock" --filter="$hhc" "${cos[@]}" \
  cache="$tmp/cache.img" cache-size=8M mode=wb stats="$tmp/stats.json"
nbdsh -u "$(nbd_uri "$tmp/g.sock")" -c "$prelude" -c '
import random
rng = random.Random(7)
for i in range(64):
    off = rng.randrange(0, len(model) - 8192)
    w(bytes([rng.randrange(1, 256)]) * 8192, off)
h.flush()
' -c "$save"
# (flushes >= 1: a file written after the workload's last request.)
poll_until 120 python3 -c 'import json, sys
st = json.load(open(sys.argv[1]))
sys.exit(0 if st["flushes"] >= 1 and st["dirty"] == 0
         and st["writeback_blocks"] > 0 else 1)' \
  "$tmp/stats.json" || fail "the gateway did not write everything back"
kill9_nbdkit "$tmp/g.pid"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}"
nbdsh -u "$uri" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()" ||
  fail "blocks the gateway wrote back were lost with the plugin's buffer"
stop_nbdkit "$tmp/n.pid"
echo "$_hhc_name: ok"
