#!/usr/bin/env bash
# hhc-gateway with "tls": {"psk_file": ...}: the front requires TLS, a
# client with the pre-shared key reads and writes the export, a client
# without TLS is refused.  Also: /metrics of the real gateway passes
# promtool.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh python3 curl openssl promtool
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
[ -x "$gateway" ] || fail "$gateway: not built"

nbd_port=$(free_port)
http_port=$(free_port)
truncate -s 16M "$tmp/a.img"
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$tmp/keys.psk"
chmod 600 "$tmp/keys.psk"
cat >"$tmp/gateway.json" <<EOF
{
  "listen": {"address": "127.0.0.1", "port": $nbd_port},
  "tls": {"psk_file": "$tmp/keys.psk"},
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$tmp/run",
  "metrics": {"address": "127.0.0.1", "port": $http_port},
  "volumes": [
    {"name": "a", "backend": {"type": "file", "path": "$tmp/a.img"},
     "cache": "$tmp/a.cache", "cache_size": "4M", "backend_id": "a"}
  ]
}
EOF
start_gateway "$gateway" "$tmp/gateway.json"

tls_uri="nbds://alice@127.0.0.1:$nbd_port/a?tls-psk-file=$tmp/keys.psk"
serves ()
{
  nbdinfo --size "$tls_uri" >/dev/null 2>&1
}
poll_until 60 serves || fail "the export does not answer over TLS-PSK"
nbdsh -c "h.set_uri_allow_local_file(True)" -c "h.connect_uri('$tls_uri')" -c '
h.pwrite(b"\x5a" * 65536, 1048576)
h.flush()
assert h.pread(65536, 1048576) == b"\x5a" * 65536
' || fail "round trip over TLS failed"
if nbdinfo --size "nbd://127.0.0.1:$nbd_port/a" >/dev/null 2>&1; then
  fail "a client without TLS was served"
fi

curl -sf --max-time 10 "http://127.0.0.1:$http_port/metrics" >"$tmp/metrics" ||
  fail "GET /metrics failed"
promtool check metrics <"$tmp/metrics" ||
  fail "promtool rejects the gateway's /metrics"
grep -q '^hhc_volume_up{volume="a"} 1' "$tmp/metrics" ||
  fail "/metrics does not show volume a up"
echo "$_hhc_name: ok"
