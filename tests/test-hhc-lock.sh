#!/usr/bin/env bash
# Two gateways cannot share one cache file.
#
# With a gateway serving on cache C, a second nbdkit on C (its own
# socket, same backend, so nothing but the lock can stop it) must fail
# with an error saying C is locked or in use, while the first keeps
# serving reads and writes.  Once the first has stopped, the lock is
# released and a new gateway starts on C and sees the data.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh
hhc=$(filter)
make_tmpdir

truncate -s 16M "$tmp/backend.img"
gw=(--filter="$hhc" file "$tmp/backend.img"
    cache="$tmp/cache.img" cache-size=16M mode=wb backend-id=lock-test)

start_nbdkit -P "$tmp/1.pid" -U "$tmp/1.sock" "${gw[@]}"
# One connection, in case the filter opens the cache lazily.
nbdinfo --size "$(nbd_uri "$tmp/1.sock")" >/dev/null

# shellcheck disable=SC2016 # nbdkit --run expands $uri
expect_fail_with 'hhc:.*(locked|in use)' \
  nbdkit -U "$tmp/2.sock" "${gw[@]}" --run 'nbdinfo --size "$uri"'

nbdinfo --size "$(nbd_uri "$tmp/1.sock")" >/dev/null ||
  fail "the first gateway stopped serving"
nbdsh_u "$tmp/1.sock" \
  -c 'h.pwrite(b"\x3c" * 65536, 1 << 20)' \
  -c 'h.flush()' \
  -c 'assert h.pread(65536, 1 << 20) == b"\x3c" * 65536' ||
  fail "the first gateway stopped serving"
stop_nbdkit "$tmp/1.pid"

start_nbdkit -P "$tmp/3.pid" -U "$tmp/3.sock" "${gw[@]}"
nbdsh_u "$tmp/3.sock" \
  -c 'assert h.pread(65536, 1 << 20) == b"\x3c" * 65536' ||
  fail "after the first gateway stopped, its data is not served"
stop_nbdkit "$tmp/3.pid"
