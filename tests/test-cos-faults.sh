#!/usr/bin/env bash
# cos plugin against tests/s3server.py injecting faults: 503,
# SlowDown, 500, malformed error bodies, cut connections (before and
# after the request was carried out) and wrong ETags, each at a set
# rate, then delays past the timeout.  A model-checked workload must
# see no error and no wrong byte; every injected fault must show up as
# exactly one counted retry of the right kind.  Then a permanently
# failing store: the FLUSH (with writeback=0 the write) ends in EIO
# after the retries, with one message naming the S3 error, nothing
# acknowledged by a FLUSH is lost, and nbdkit serves on when the store
# recovers.  While the write-back buffer is full of such failed stores,
# zeros over zeros still succeed.
#
# The seed is fixed so that CI sees the same faults every time (and
# every kind of them); HHC_TEST_SEED=N tries another (it is printed).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

seed=${HHC_TEST_SEED:-4242}
echo "$_hhc_name: seed $seed"
rate=0.02
start_s3server --bucket vol --seed "$seed" --fault-503 $rate \
  --fault-slowdown $rate --fault-500 $rate --fault-badxml $rate \
  --fault-cut $rate --fault-cut-after $rate --fault-etag 0.05
read -r -a creds <<<"$(s3_creds)"
cos=("$plugin" endpoint="$s3_endpoint" bucket=vol prefix=f "${creds[@]}"
     retries=10 backoff=1 timeout=1 cos-stats="$tmp/stats.json")

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" \
  create=true size=2M object-size=16K
uri=$(nbd_uri "$tmp/n.sock")

# WORKLOAD: random writes, whole and partial, zeroes and trims, each
# read back; the model of the volume is kept in $tmp/model.img.
workload='
import random, os
rng = random.Random(SEED)
path = "'"$tmp/model.img"'"
size = h.get_size()
model = bytearray(open(path, "rb").read()) if os.path.exists(path) else bytearray(size)
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
for i in range(N):
    op = rng.random()
    n = rng.choice([1, 512, 5000, 16384, 40000])
    off = rng.randrange(0, size - n)
    if op < 0.7:
        data = bytes([rng.randrange(1, 256)]) * n
        h.pwrite(data, off)
        model[off:off + n] = data
    elif op < 0.85:
        h.zero(n, off)
        model[off:off + n] = bytes(n)
    else:
        h.trim(n, off)
        model[off:off + n] = bytes(n)
    assert h.pread(n, off) == bytes(model[off:off + n]), ("op", i, off, n)
assert h.pread(size, 0) == bytes(model), "volume differs from the model"
open(path, "wb").write(model)
'
SECONDS=0
nbdsh -u "$uri" -c "SEED = $seed; N = 100" -c "$workload"
echo "$_hhc_name: faults phase took $SECONDS s"

# Delays past timeout=1, on reads only (a delayed PUT that the server
# carries out after the client gave up could overwrite a newer one: no
# store orders requests that overlap in time, see the man page).
s3_config 'fault-503=0&fault-slowdown=0&fault-500=0&fault-badxml=0&fault-cut=0&fault-cut-after=0&fault-etag=0&fault-delay=0.05&delay=1.5&fault-ops=GET'
nbdsh -u "$uri" -c "SEED = $seed + 1; N = 15" -c "$workload"
s3_config 'fault-delay=0'
stop_nbdkit "$tmp/n.pid"

# Every fault cost exactly one retry, counted by kind.
python3 - "$tmp/stats.json" "$(s3_stats)" "$seed" <<'EOF' || fail "retries do not match the faults"
import json, sys
st = json.load(open(sys.argv[1]))
f = json.loads(sys.argv[2])["faults"]
print("plugin:", st)
print("server faults:", f)
total = sum(f.values())
assert total >= 10, "too few faults were injected to test anything"
assert st["failures"] == 0, st
# A cut connection is retried by the plugin, or, when it was a reused
# one, by curl itself on a new connection, which the plugin counts as
# a reconnect.  A timeout is always the plugin's retry.
cuts = f["cut"] + f["cut-after"]
assert st["retry_http"] == f["503"] + f["500"] + f["badxml"]
assert st["retry_slowdown"] == f["slowdown"]
assert st["retry_etag"] == f["etag"]
assert st["retry_network"] >= f["delay"]
assert st["retry_network"] - f["delay"] + st["reconnects"] >= cuts
assert st["retry_network"] <= f["delay"] + cuts
assert st["retries"] == (st["retry_http"] + st["retry_slowdown"]
                         + st["retry_etag"] + st["retry_network"])
# The default seed makes every kind of fault happen at least once.
if sys.argv[3] == "4242":
    assert all(n > 0 for n in f.values()), f
EOF

# The store fails for good.  Write-back (the default): the write is
# acknowledged, and the FLUSH ends in EIO after retries=3, with a
# message naming the S3 error and the give-up; the object stays dirty
# (reads see the write) and the FLUSH after the store recovered stores
# it.  Malformed error bodies do not crash.
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" retries=3
log=$tmp/nbdkit-$_hhc_nlogs.log
n=0
for fault in fault-503 fault-badxml; do
  n=$((n + 1))
  s3_config "$fault=1&fault-ops=PUT,DELETE"
  nbdsh -u "$uri" -c "N = $n" -c '
data = bytes([0xe0 + N]) * 16384
h.pwrite(data, 16384 * 7)
try:
    h.flush()
    raise SystemExit("the flush succeeded against a failing store")
except nbd.Error as e:
    assert e.errno == "EIO", e  # libnbd gives the name of the errno
assert h.pread(16384, 16384 * 7) == data, "the failed object lost its write"
'
  s3_config "$fault=0"
  nbdsh -u "$uri" -c 'h.flush()'
done
grep -q 'cos: PUT s3://vol/f/0000000000000007: HTTP 503 ServiceUnavailable.*(gave up after 3 retries)' "$log" ||
  fail "no clear message for the permanent 503: $(cat "$log")"
grep -Eq 'cos: PUT s3://vol/f/0000000000000007: HTTP 500 \(no S3 error code\)( \(request id [^)]*\))? \(gave up after 3 retries\)' "$log" ||
  fail "no clear message for the malformed error body: $(cat "$log")"
grep -q 'cos: flush: dirty objects could not be stored' "$log" ||
  fail "no clear message for the failed flush: $(cat "$log")"
stop_nbdkit "$tmp/n.pid"
python3 - "$tmp/model.img" <<'EOF2'
import sys
m = bytearray(open(sys.argv[1], "rb").read())
m[16384 * 7:16384 * 8] = b"\xe2" * 16384
open(sys.argv[1], "wb").write(m)
EOF2

# A buffer full of objects whose stores fail (writeback= one object):
# zeros over zeros still succeed, as they change nothing; a write that
# needs room ends in EIO.
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" retries=1 \
  writeback=16K
nbdsh -u "$uri" -c '
h.pwrite(b"\xd2" * 16384, 16384 * 8)
h.zero(16384, 16384 * 9)
h.flush()
'
s3_config "fault-503=1&fault-ops=PUT,DELETE"
nbdsh -u "$uri" -c '
h.pwrite(b"\xd1" * 16384, 16384 * 7)
try:
    h.flush()
    raise SystemExit("the flush succeeded against a failing store")
except nbd.Error as e:
    assert e.errno == "EIO", e
h.zero(16384, 16384 * 9)
h.zero(4096, 16384 * 9 + 4096)
assert h.pread(16384, 16384 * 9) == bytes(16384)
for off, n in ((16384 * 8 + 4096, 4096), (16384 * 8, 16384)):
    try:
        h.zero(n, off)
        raise SystemExit("zeroing a clean object found room in a full buffer")
    except nbd.Error as e:
        assert e.errno == "EIO", e
assert h.pread(16384, 16384 * 8) == b"\xd2" * 16384
' || fail "zeros over zeros failed while the buffer was full of failed stores"
s3_config "fault-503=0"
nbdsh -u "$uri" -c 'h.flush()'
stop_nbdkit "$tmp/n.pid"
python3 - "$tmp/model.img" <<'EOF2'
import sys
m = bytearray(open(sys.argv[1], "rb").read())
m[16384 * 7:16384 * 10] = b"\xd1" * 16384 + b"\xd2" * 16384 + bytes(16384)
open(sys.argv[1], "wb").write(m)
EOF2

# writeback=0: the write itself ends in EIO, and the object keeps its
# old content.  The recovered store holds what the FLUSHes above
# stored.
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" retries=3 \
  writeback=0
s3_config "fault-503=1&fault-ops=PUT,DELETE"
nbdsh -u "$uri" -c '
try:
    h.pwrite(b"\xee" * 16384, 16384 * 7)
    raise SystemExit("the write succeeded against a failing store")
except nbd.Error as e:
    assert e.errno == "EIO", e
'
s3_config "fault-503=0"
nbdsh -u "$uri" -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()"
stop_nbdkit "$tmp/n.pid"
echo "$_hhc_name: ok"
