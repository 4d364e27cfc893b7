#!/usr/bin/env bash
# cos plugin against tests/s3server.py, which checks the SigV4
# signature, the payload hash and Content-MD5 of every request: a
# workload of every kind of request (create, metadata, partial and
# whole writes, zero, trim, extents listing, reopen), with a prefix full
# of characters that need encoding, must have every request verified
# and none rejected.  A wrong secret or key id is refused at start-up
# with one line, and the secret appears in no output even with -v.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh nbdinfo openssl base64 sha256sum
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

# A secret that cannot be mistaken for anything else in the output.
s3_secret_key=sk-$RANDOM-$RANDOM-$RANDOM
start_s3server --bucket vol
read -r -a creds <<<"$(s3_creds)"
prefix='dir with space/ü$+=&~x'
cos=("$plugin" endpoint="$s3_endpoint" bucket=vol prefix="$prefix"
     "${creds[@]}")

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" \
  create=true size=1M object-size=64K
uri=$(nbd_uri "$tmp/n.sock")
nbdsh -u "$uri" -c '
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
model = bytearray(h.get_size())
for off, n, b in [(100, 70000, 1), (65536, 65536, 2), (200000, 10, 3),
                  (300000, 131072, 4)]:
    h.pwrite(bytes([b]) * n, off)
    model[off:off + n] = bytes([b]) * n
h.zero(65536, 65536)
model[65536:131072] = bytes(65536)
h.trim(1000, 200005)
model[200005:201005] = bytes(1000)
h.flush()
assert h.pread(len(model), 0) == bytes(model)
open("'"$tmp/model.img"'", "wb").write(model)
'
nbdinfo --map "$uri" >"$tmp/map"
grep -q data "$tmp/map" && grep -q hole "$tmp/map" ||
  fail "extents map lacks data or holes: $(cat "$tmp/map")"
# Other keys under the prefix that sort before the objects ('!' < '0')
# fill the listing (max-keys is the number of objects asked about), so
# it comes back truncated: the map must still show no hole where an
# object is.  (s3rver cannot do truncated listings under Node 20: its
# continuation token uses a cipher OpenSSL 3 refuses.)
echo stray >"$tmp/stray"
sha=$(sha256sum <"$tmp/stray" | cut -d' ' -f1)
md5=$(openssl md5 -binary <"$tmp/stray" | base64)
eprefix=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/-_.~"))' "$prefix")
for i in $(seq 1 20); do
  curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$s3_access_key:$s3_secret_key" -H "x-amz-content-sha256: $sha" \
    -H "Content-MD5: $md5" -T "$tmp/stray" "$s3_endpoint/vol/$eprefix/!stray-$i" >/dev/null ||
    fail "PUT of a stray key failed"
done
nbdinfo --map --json "$uri" >"$tmp/map.json"
python3 - "$tmp/map.json" "$tmp/model.img" <<'PY' || fail "a hole reported where an object is"
import json, sys
m = json.load(open(sys.argv[1]))
model = open(sys.argv[2], "rb").read()
osize = 65536
for e in m:
    if e["type"] & 1:
        for o in range(e["offset"] // osize, (e["offset"] + e["length"]) // osize):
            assert not any(model[o * osize:(o + 1) * osize]), ("hole over data", o, e)
PY
stop_nbdkit "$tmp/n.pid"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}"
nbdsh -u "$uri" -c "assert h.pread(h.get_size(), 0) == open('$tmp/model.img', 'rb').read()"
stop_nbdkit "$tmp/n.pid"

# The objects are where the layout says, names unencoded.
curl -sf "$s3_endpoint/__objects/vol" >"$tmp/objects.json"
python3 - "$tmp/objects.json" "$prefix" <<'EOF'
import json, sys
keys = sorted(o["key"] for o in json.load(open(sys.argv[1])))
p = sys.argv[2]
assert p + "/volume.json" in keys, keys
assert p + "/0000000000000000" in keys, keys
assert p + "/0000000000000001" not in keys, keys  # zeroed whole
EOF

verified=$(s3_stats verified)
[ "$(s3_stats rejected)" -eq 0 ] ||
  fail "s3server.py rejected requests: $(s3_stats)"
[ "$verified" -ge 20 ] || fail "too few requests verified: $(s3_stats)"
[ "$(s3_stats unsigned_payload)" -eq 0 ] || fail "unsigned payloads sent"
[ "$(s3_stats put_without_md5)" -eq 0 ] || fail "PUT without Content-MD5"
for m in GET PUT DELETE; do
  [ "$(s3_stats by_method.$m)" -gt 0 ] || fail "no $m request was made"
done

# Wrong secret, wrong key id: one error line, nothing served.
printf 'not-the-secret-%s' "$RANDOM" >"$tmp/bad-secret"
expect_fail_with '^nbdkit: error: cos: GET s3://vol/.*: HTTP 403 SignatureDoesNotMatch' \
  timeout 60 nbdkit -f -v -U "$tmp/x.sock" "$plugin" endpoint="$s3_endpoint" \
  bucket=vol prefix="$prefix" access-key=+"$tmp/access-key" \
  secret-key=+"$tmp/bad-secret"
err=$tmp/expect-$_hhc_nexpect.err
[ "$(grep -c 'error:' "$err")" -eq 1 ] || fail "more than one error line: $(cat "$err")"
grep -qF "$(cat "$tmp/bad-secret")" "$err" && fail "the secret appears in the -v output"
grep -qF "Signature=" "$err" && fail "a signature appears in the -v output"
expect_fail_with 'HTTP 403 InvalidAccessKeyId' \
  env AWS_ACCESS_KEY_ID=NOSUCHKEY AWS_SECRET_ACCESS_KEY="$s3_secret_key" \
  timeout 60 nbdkit -f -U "$tmp/x.sock" "$plugin" endpoint="$s3_endpoint" \
  bucket=vol prefix="$prefix"
[ "$(s3_stats rejected)" -eq 2 ] || fail "expected 2 rejections: $(s3_stats)"

# Credentials from the environment work, and -v does not show them.
env AWS_ACCESS_KEY_ID="$s3_access_key" AWS_SECRET_ACCESS_KEY="$s3_secret_key" \
  timeout 60 nbdkit -v -U - "$plugin" endpoint="$s3_endpoint" bucket=vol \
  prefix="$prefix" --run 'nbdinfo --size "$uri"' >"$tmp/env.out" 2>"$tmp/env.err"
grep -qx 1048576 "$tmp/env.out" || fail "env credentials: $(cat "$tmp/env.err")"
grep -qF "$s3_secret_key" "$tmp/env.err" && fail "the secret appears in the -v output"
echo "$_hhc_name: ok"
