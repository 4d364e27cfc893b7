#!/usr/bin/env bash
# A plugin that is not fully parallel.
#
# With nbdkit's noparallel filter below ours (serialize=requests), the
# filter serialises every call to the plugin itself, also the
# write-back's from its background context.  Four concurrent writers
# with a small cache (so write-back and eviction run during the
# writes) must all find their data; then the backend file, after a
# clean stop (everything flushed, dirty blocks kept), and after a
# restart in wt mode (which writes everything back first), must equal
# what was written.  A plugin that allows only one connection
# (serialize=connections) is refused with a clear error.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp
hhc=$(filter)
make_tmpdir

truncate -s 8M "$tmp/backend.img"
gw=(--filter="$hhc" --filter=noparallel file "$tmp/backend.img"
    cache="$tmp/cache.img" cache-size=1M backend-id=serialize-test
    dirty-low=5 dirty-high=10)

start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}" serialize=requests

pids=()
for w in 0 1 2 3; do
  nbdsh_u "$tmp/sock" -c "
w = $w
for b in range(w, 2048, 4):
    h.pwrite(bytes([0x40 + w]) * 4096, b * 4096)
h.flush()
" &
  pids+=($!)
done
for p in "${pids[@]}"; do
  wait "$p" || fail "a writer failed"
done

# The expected image, and a check through the gateway.
python3 - "$tmp/expected.img" <<'PY'
import sys
with open(sys.argv[1], "wb") as f:
    for b in range(2048):
        f.write(bytes([0x40 + b % 4]) * 4096)
PY
nbdsh_u "$tmp/sock" -c "
exp = open('$tmp/expected.img', 'rb').read()
assert h.pread(len(exp), 0) == exp, 'data read through the gateway differs'
"
stop_nbdkit "$tmp/pid"

start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}" serialize=requests \
  mode=wt
stop_nbdkit "$tmp/pid"
cmp "$tmp/expected.img" "$tmp/backend.img" ||
  fail "the backend does not hold the written data after write-back"

expect_fail_with 'hhc:.*(one connection|serialize_connections)' \
  timeout 60 nbdkit -f -U "$tmp/sock2" "${gw[@]}" serialize=connections
