#!/usr/bin/env bash
# cos plugin on s3rver: four clients at once write interleaved 512-byte
# pieces of the same few objects (every write is a partial-object
# read-modify-write, so without the per-object lock they would undo
# each other's pieces), while a fifth rewrites whole objects elsewhere.
# Every piece must be there afterwards, through a fresh connection.
# Run twice: with the object cache (the default: read-modify-writes
# find their object there) and without it (object-cache=0).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

start_s3rver vol
read -r -a creds <<<"$(s3_creds)"
uri=$(nbd_uri "$tmp/n.sock")

for run in cached uncached; do
opts=(cos-stats="$tmp/$run.json")
[ "$run" = cached ] || opts+=(object-cache=0)
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" \
  endpoint="$s3_endpoint" bucket="$s3_bucket" prefix=$run "${creds[@]}" \
  create=true size=2M object-size=16K connections=8 "${opts[@]}"

# Client K (0..3) writes piece i of objects 0..3 when i % 4 == K, in
# a shuffled order; pieces are 512 bytes, 32 per 16K object.
writer='
import random
k = int(K)
rng = random.Random(k)
pieces = [(o, i) for o in range(4) for i in range(32) if i % 4 == k]
rng.shuffle(pieces)
for o, i in pieces:
    h.pwrite(bytes([1 + o * 32 + i]) * 512, o * 16384 + i * 512)
'
# Client 4 rewrites whole objects 10..19 a few times.
whole='
for r in range(3):
    for o in range(10, 20):
        h.pwrite(bytes([100 + r + o]) * 16384, o * 16384)
'
pids=()
for k in 0 1 2 3; do
  nbdsh -u "$uri" -c "K = $k" -c "$writer" &
  pids+=($!)
done
nbdsh -u "$uri" -c "$whole" &
pids+=($!)
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
[ "$st" -eq 0 ] || fail "a client failed"

nbdsh -u "$uri" -c '
for o in range(4):
    for i in range(32):
        got = h.pread(512, o * 16384 + i * 512)
        assert got == bytes([1 + o * 32 + i]) * 512, ("piece lost", o, i, got[0])
for o in range(10, 20):
    assert h.pread(16384, o * 16384) == bytes([102 + o]) * 16384, ("object", o)
'
stop_nbdkit "$tmp/n.pid"
hits=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cache_hits"])' "$tmp/$run.json")
case $run in
  cached) [ "$hits" -gt 0 ] || fail "the object cache was never hit" ;;
  uncached) [ "$hits" -eq 0 ] || fail "object-cache=0 still cached" ;;
esac
done
echo "$_hhc_name: ok"
