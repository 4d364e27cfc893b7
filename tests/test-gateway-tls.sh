#!/usr/bin/env bash
# hhc-gateway with "tls": {"psk_file": ...}: the front requires TLS, a
# client with the pre-shared key reads and writes the exports, a client
# without TLS is refused.  Volume b is an iSCSI LUN on a private tgtd
# with CHAP (the password reaches nbdkit through a pipe and appears in
# no command line or log) and "sessions": 3 (the target sees three).  Also: /metrics of the real gateway passes
# promtool.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh python3 curl openssl promtool cmp
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
gateway=$abs_top_builddir/appliance/hhc-gateway
[ -x "$gateway" ] || fail "$gateway: not built"

read -r nbd_port http_port < <(free_ports 2)
truncate -s 16M "$tmp/a.img"
start_tgtd
truncate -s 16M "$tmp/lun.img"
add_lun iqn.2026-01.test:gw "$tmp/lun.img"
secret=gw-chap-s3cr3t-0042
tgtadm_ --op new --mode account --user hhc --password "$secret"
tgtadm_ --op bind --mode account --tid 1 --user hhc
printf 'hhc\n%s\n' "$secret" >"$tmp/chap"
chmod 600 "$tmp/chap"
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
     "cache": "$tmp/a.cache", "cache_size": "4M", "backend_id": "a"},
    {"name": "b", "backend": {"type": "iscsi", "url": "$(tgt_url)",
                              "chap_file": "$tmp/chap", "sessions": 3,
                              "timeout": 30},
     "cache": "$tmp/b.cache", "cache_size": "4M", "mode": "wt"}
  ]
}
EOF
start_gateway "$gateway" "$tmp/gateway.json"

tls_uri="nbds://alice@127.0.0.1:$nbd_port/a?tls-psk-file=$tmp/keys.psk"
serves ()
{
  timeout 10 nbdinfo --size "$1" >/dev/null 2>&1
}
poll_until 60 serves "$tls_uri" || fail "the export does not answer over TLS-PSK"
nbdsh -c "h.set_uri_allow_local_file(True)" -c "h.connect_uri('$tls_uri')" -c '
h.pwrite(b"\x5a" * 65536, 1048576)
h.flush()
assert h.pread(65536, 1048576) == b"\x5a" * 65536
' || fail "round trip over TLS failed"
# Volume b (mode wt): what is written is in the LUN's backing file.
b_uri="nbds://alice@127.0.0.1:$nbd_port/b?tls-psk-file=$tmp/keys.psk"
poll_until 60 serves "$b_uri" || fail "the iSCSI volume does not answer"
nbdsh -c "h.set_uri_allow_local_file(True)" -c "h.connect_uri('$b_uri')" -c '
h.pwrite(b"\x6b" * 131072, 4096)
h.flush()
' || fail "round trip to the iSCSI volume failed"
head -c 131072 /dev/zero | tr '\0' '\153' >"$tmp/b.expected"
cmp -n 131072 -i 4096:0 "$tmp/lun.img" "$tmp/b.expected" ||
  fail "the iSCSI LUN does not hold what was written through the gateway"
# "sessions": 3 reached the plugin: the target sees three sessions.
sessions () { tgtadm_ --op show --mode conn --tid 1 | grep -c '^Session: ' || true; }
three () { [ "$(sessions)" -eq 3 ]; }
poll_until 30 three || fail "the target has $(sessions) sessions, not the 3 configured"
if grep -q -- "$secret" "$tmp/gateway.log" ||
   ps -eo args | grep -v grep | grep -q -- "$secret"; then
  fail "the CHAP secret appears in a log or a command line"
fi

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
