#!/usr/bin/env bash
# cos plugin over https (s3rver with a self-signed certificate for
# 127.0.0.1): the certificate is verified by default, so the plugin
# refuses the server with one clear error; ca-file= with the
# certificate makes it trusted; tls-verify=false skips the check.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh openssl
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" \
  -out "$tmp/cert.pem" 2>/dev/null
start_s3rver vol --key "$tmp/key.pem" --cert "$tmp/cert.pem"
https=$s3_endpoint
read -r -a creds <<<"$(s3_creds)"
cos=("$plugin" endpoint="$https" bucket=vol prefix=tls "${creds[@]}"
     retries=1 backoff=1)

expect_fail_with 'cos: GET s3://vol/tls/volume.json: .*(certificate|SSL)' \
  timeout 60 nbdkit -f -U "$tmp/x.sock" "${cos[@]}" create=true size=1M
expect_fail_with 'ca-file=.*/nonexistent.pem' \
  timeout 60 nbdkit -f -U "$tmp/x.sock" "${cos[@]}" ca-file="$tmp/nonexistent.pem"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" \
  ca-file="$tmp/cert.pem" create=true size=1M object-size=64K
nbdsh -u "$(nbd_uri "$tmp/n.sock")" \
  -c 'h.pwrite(b"\x42" * 100000, 3)' \
  -c 'assert h.pread(100000, 3) == b"\x42" * 100000'
stop_nbdkit "$tmp/n.pid"

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "${cos[@]}" tls-verify=false
nbdsh -u "$(nbd_uri "$tmp/n.sock")" \
  -c 'assert h.pread(100000, 3) == b"\x42" * 100000'
stop_nbdkit "$tmp/n.pid"
echo "$_hhc_name: ok"
