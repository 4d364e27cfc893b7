#!/usr/bin/env bash
# The hhc filter in front of the cos plugin (the CSG-style gateway):
# mode hhc with an HDD log; flushed writes survive kill -9 of the
# gateway and read back after the restart.  The cache is tied to the
# volume by the plugin's export description (no backend-id=): another
# volume of the same size, same bucket, is refused with that cache.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh qemu-io python3
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

start_s3rver vol
read -r -a creds <<<"$(s3_creds)"
cos=("$plugin" endpoint="$s3_endpoint" bucket="$s3_bucket" "${creds[@]}")
# No write-back before the kill -9 (high watermarks, no idle write-back,
# a log with room for the dirty blocks): s3rver keeps the part of a PUT
# that a killed client had sent (a real S3 PUT is atomic), and the next
# start's read-modify-write of that object then fails (seen in CI:
# "short answer: 261663 of 262144 bytes").
gw=(cache="$tmp/cache.img" cache-size=8M log="$tmp/log.img" log-size=40M
    dirty-low=90 dirty-high=95 idle-ms=0)

# Two volumes of 16M made by the plugin alone.
for p in a b; do
  start_nbdkit -P "$tmp/mk.pid" -U "$tmp/mk.sock" "${cos[@]}" prefix=$p \
    create=true size=16M object-size=256K
  stop_nbdkit "$tmp/mk.pid"
done

truncate -s 16M "$tmp/expected.img"
ops=('write -P 0xa1 1M 3M' 'write -P 0xb2 12345 20000' 'write -z 5M 64k'
     'write -P 0xc3 9M 4k' 'flush')
args=()
for op in "${ops[@]}"; do args+=(-c "$op"); done
apply_ops "$tmp/expected.img" "${ops[@]}"

start_nbdkit -P "$tmp/1.pid" -U "$tmp/1.sock" --filter="$hhc" "${cos[@]}" "${gw[@]}" prefix=a
qemu_io_u "$tmp/1.sock" "${args[@]}" >/dev/null
kill9_nbdkit "$tmp/1.pid"

start_nbdkit -P "$tmp/2.pid" -U "$tmp/2.sock" --filter="$hhc" "${cos[@]}" "${gw[@]}" prefix=a
nbdsh -u "$(nbd_uri "$tmp/2.sock")" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/expected.img', 'rb').read()" ||
  fail "flushed data lost across kill -9"
stop_nbdkit "$tmp/2.pid"

# Volume b has the same size but another identity: refused, and the
# cache is left as it was (volume a still reads back through it).
expect_fail_with 'hhc:.*(identity|belongs to)' \
  timeout 60 nbdkit -f -U "$tmp/x.sock" --filter="$hhc" "${cos[@]}" "${gw[@]}" prefix=b
start_nbdkit -P "$tmp/3.pid" -U "$tmp/3.sock" --filter="$hhc" "${cos[@]}" "${gw[@]}" prefix=a
nbdsh -u "$(nbd_uri "$tmp/3.sock")" \
  -c "assert h.pread(h.get_size(), 0) == open('$tmp/expected.img', 'rb').read()" ||
  fail "volume a's data lost after the refused start"
stop_nbdkit "$tmp/3.pid"
echo "$_hhc_name: ok"
