#!/usr/bin/env bash
# cos plugin: bad input gives one clear error line at start-up and
# changes nothing in the bucket: bad parameters, no credentials, a
# missing bucket, no volume without create=true, a volume.json that is
# not ours (foreign JSON, not JSON, a newer format version), an
# unreachable endpoint, and error answers whose XML is malformed.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit curl sha256sum
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

start_s3server --bucket vol
read -r -a creds <<<"$(s3_creds)"
ep=endpoint=$s3_endpoint

# refused REGEX ARGS...: nbdkit with the plugin and ARGS must fail with
# exactly one error line matching REGEX.
refused ()
{
  local regex=$1
  shift
  expect_fail_with "$regex" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
    timeout 60 nbdkit -f -U "$tmp/x.sock" "$plugin" "$@"
  local err=$tmp/expect-$_hhc_nexpect.err
  [ "$(grep -c 'error' "$err")" -eq 1 ] ||
    fail "more than one error line for $*: $(cat "$err")"
}

# put KEY FILE: store FILE as object KEY of the bucket (signed by curl).
put ()
{
  s3_curl -f -H "x-amz-content-sha256: $(sha256sum <"$2" | cut -d' ' -f1)" \
    -T "$2" "$s3_endpoint/$s3_bucket/$1" >/dev/null || fail "curl PUT $1 failed"
}

# Parameters.
refused 'endpoint= and bucket= are required' bucket="$s3_bucket" "${creds[@]}"
refused 'endpoint= and bucket= are required' "$ep" "${creds[@]}"
refused 'object-size=3000: must be a power of two' "$ep" bucket="$s3_bucket" object-size=3000
refused 'object-size=64M: must be a power of two from 4K to 32M' "$ep" bucket="$s3_bucket" object-size=64M
refused 'size=1000: must be a positive multiple of 512' "$ep" bucket="$s3_bucket" size=1000
refused 'addressing=sideways: use path or virtual' "$ep" bucket="$s3_bucket" addressing=sideways
refused 'endpoint=ftp://127.0.0.1: the scheme must be http or https' \
  endpoint=ftp://127.0.0.1 bucket="$s3_bucket" "${creds[@]}"
refused 'endpoint=.*: expected .*with no path' \
  endpoint="$s3_endpoint/some/path" bucket="$s3_bucket" "${creds[@]}"
refused 'cos: retries=x: not a number' "$ep" bucket="$s3_bucket" retries=x
refused 'connections=0: must be between 1 and 1024' "$ep" bucket="$s3_bucket" connections=0
refused "unknown parameter 'colour'" "$ep" bucket="$s3_bucket" colour=blue
refused 'prefix=: longer than 1000 bytes' "$ep" bucket="$s3_bucket" \
  prefix="$(printf 'p%.0s' $(seq 1001))"
refused 'create=true needs size=' "$ep" bucket="$s3_bucket" create=true "${creds[@]}"
refused 'no credentials' "$ep" bucket="$s3_bucket"
refused 'secret-key=.*|No such file' "$ep" bucket="$s3_bucket" access-key=x \
  secret-key=+"$tmp/no-such-file"

# The store.
refused "bucket 'nope' does not exist" "$ep" bucket=nope "${creds[@]}"
refused "no volume at s3://$s3_bucket/empty/volume.json .*create=true size=SIZE" \
  "$ep" bucket="$s3_bucket" prefix=empty "${creds[@]}"
refused 'Could not connect|Couldn.t connect|Connection refused|Failed to connect' \
  endpoint=http://127.0.0.1:1 bucket="$s3_bucket" "${creds[@]}" retries=1 backoff=1

echo '{"kind": "something else", "size": 1}' >"$tmp/foreign.json"
put foreign/volume.json "$tmp/foreign.json"
refused "s3://$s3_bucket/foreign/volume.json is not an hhc cos volume" \
  "$ep" bucket="$s3_bucket" prefix=foreign "${creds[@]}"
printf '\x00\x01 not json at all' >"$tmp/garbage.json"
put garbage/volume.json "$tmp/garbage.json"
refused "s3://$s3_bucket/garbage/volume.json is not an hhc cos volume: not JSON" \
  "$ep" bucket="$s3_bucket" prefix=garbage "${creds[@]}"
cat >"$tmp/v2.json" <<'EOF'
{"format": "hhc-cos-volume", "version": 2, "size": 1048576,
 "object_size": 65536, "uuid": "00000000-0000-4000-8000-000000000000"}
EOF
put v2/volume.json "$tmp/v2.json"
refused 'volume format version 2 is not supported' \
  "$ep" bucket="$s3_bucket" prefix=v2 "${creds[@]}"
# create=true does not overwrite metadata that is not ours.
refused 'is not an hhc cos volume' \
  "$ep" bucket="$s3_bucket" prefix=foreign create=true size=1M "${creds[@]}"
printf '%s\n' foreign/volume.json garbage/volume.json v2/volume.json \
  >"$tmp/objects.expected"
s3_objects '' >"$tmp/objects.actual"
diff -u "$tmp/objects.expected" "$tmp/objects.actual" ||
  fail "refused starts changed the bucket"
[ "$s3_store" = local ] || { echo "$_hhc_name: ok"; exit 0; }

# Error answers with malformed XML bodies (truncated, garbage, empty)
# make a clear error, not a crash (s3server.py's faults: not on RGW).
s3_config 'fault-badxml=1'
refused "cos: GET s3://$s3_bucket/foreign/volume.json: HTTP 500 \(no S3 error code\).*gave up after 2 retries" \
  "$ep" bucket="$s3_bucket" prefix=foreign "${creds[@]}" retries=2 backoff=1
s3_config 'fault-badxml=0'
[ "$(s3_stats faults.badxml)" -eq 3 ] || fail "expected 3 malformed answers"
echo "$_hhc_name: ok"
