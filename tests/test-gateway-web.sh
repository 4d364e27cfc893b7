#!/usr/bin/env bash
# hhc-gateway's status and metrics HTTP server (appliance/httpd.c), run
# by tests/web/httpd-serve on a sample status document:
#
#   /metrics  passes promtool check metrics, and follows the document
#             (it is re-read on every request)
#   /status   is the document, valid JSON
#   /         HTML that headless Chromium renders: a screenshot of
#             some size, a DOM that holds the volumes' names (escaped)
#   /nope 404, POST 405 with Allow, HEAD 200 without a body
#   a status that cannot be read 503; a bad address fails to start
#
# HHC_WEB_SCREENSHOT=FILE keeps a copy of the screenshot.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires curl promtool python3 chromium
serve=${abs_top_builddir:-.}/tests/web/httpd-serve
[ -x "$serve" ] || fail "$serve: not built"
make_tmpdir

cat >"$tmp/status.json" <<'EOF'
{
  "gateway": {"version": "0.1", "uptime_s": 3725,
              "config": "/etc/hhc/gateway.json"},
  "volumes": [
    {"name": "vm1", "state": "running", "pid": 1234, "restarts": 0,
     "backend": "file",
     "stats": {"mode": "hhc", "block_size": 4096, "slots": 16384,
       "free": 4000, "clean": 9000, "dirty": 3384,
       "read_hits": 900, "read_misses": 100, "write_hits": 30,
       "write_misses": 40, "bytes_read": 1073741824,
       "bytes_written": 536870912, "evictions": 12,
       "writeback_blocks": 5000, "writeback_backlog": 3384,
       "writeback_errors": 0, "writeback_retries": 1, "backend_errors": 0,
       "stalls": 0, "log_fallbacks": 0, "flushes": 70, "flush_errors": 2,
       "backend_flush_failed": true,
       "flush_latency_us": {"p50": 127, "p99": 1023, "p999": 2047},
       "flush_latency_buckets": [[3, 0], [7, 0], [15, 0], [31, 1],
         [63, 5], [127, 40], [255, 52], [511, 60], [1023, 69],
         [2047, 70], [4095, 70]],
       "ram_bytes_per_block": 20.5,
       "log": {"segments": 9, "barriers": 70, "syncs": 70, "blocks": 900,
         "revokes": 3, "relogged": 0, "full_waits": 0,
         "used_bytes": 6291456, "region_bytes": 8388608, "mirrors": 2,
         "mirrors_failed": 1,
         "mirror": [{"name": "/var/lib/hhc/log1.img", "failed": false},
                    {"name": "/var/lib/hhc/log2.img", "failed": true}]}}},
    {"name": "db-2", "state": "restarting", "pid": 0, "restarts": 3,
     "backend": "cos", "stats": null},
    {"name": "odd \"vol\" <3>", "state": "running", "pid": 1240,
     "restarts": 1, "backend": "iscsi",
     "stats": {"mode": "wb", "slots": 1000, "dirty": 950,
               "read_hits": 1, "read_misses": 3}}
  ]
}
EOF

start_httpd_serve "$serve" "$tmp/status.json"
url=http://127.0.0.1:$httpd_port

# status_of METHOD PATH: the HTTP status code.
status_of ()
{
  curl -s -o "$tmp/body" -D "$tmp/headers" -X "$1" -w '%{http_code}' \
    "$url$2"
}

# /metrics: promtool's lint, a few samples, the content type.
curl -sf -D "$tmp/headers" "$url/metrics" >"$tmp/metrics"
promtool check metrics <"$tmp/metrics" ||
  fail "promtool check metrics rejects /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/headers" ||
  fail "/metrics: wrong content type: $(cat "$tmp/headers")"
for line in 'hhc_volume_up{volume="vm1"} 1' \
            'hhc_volume_up{volume="db-2"} 0' \
            'hhc_cache_dirty_slots{volume="odd \"vol\" <3>"} 950' \
            'hhc_log_mirror_healthy{volume="vm1",mirror="/var/lib/hhc/log2.img"} 0' \
            'hhc_flush_latency_seconds_bucket{volume="vm1",le="0.000127"} 40' \
            'hhc_flush_latency_seconds_count{volume="vm1"} 70' \
            'hhc_flush_errors_total{volume="vm1"} 2' \
            'hhc_backend_flush_failed{volume="vm1"} 1'; do
  grep -qxF "$line" "$tmp/metrics" || fail "/metrics lacks: $line"
done

# /status: the document, as JSON.
curl -sf -D "$tmp/headers" "$url/status" >"$tmp/status.out"
python3 -c 'import json, sys; d = json.load(sys.stdin); assert len(d["volumes"]) == 3' \
  <"$tmp/status.out" || fail "/status is not the document as JSON"
grep -qi '^content-type: application/json' "$tmp/headers" ||
  fail "/status: wrong content type"

# Errors.
[ "$(status_of GET /nope)" = 404 ] || fail "/nope: not 404"
[ "$(status_of POST /metrics)" = 405 ] || fail "POST /metrics: not 405"
grep -qi '^allow: GET, HEAD' "$tmp/headers" || fail "405 without Allow"
[ "$(status_of DELETE /)" = 405 ] || fail "DELETE /: not 405"
[ "$(curl -s -I -o /dev/null -w '%{http_code}' "$url/status")" = 200 ] ||
  fail "HEAD /status: not 200"
curl -s -I "$url/status" >"$tmp/head"
grep -qi '^content-type: application/json' "$tmp/head" ||
  fail "HEAD /status: no content type"

# The page: escaped names, then Chromium's rendering.
curl -sf -D "$tmp/headers" "$url/" >"$tmp/page.html"
grep -qi '^content-type: text/html' "$tmp/headers" || fail "/: not text/html"
grep -qF 'odd &quot;vol&quot; &lt;3&gt;' "$tmp/page.html" ||
  fail "/: the odd volume's name is not HTML-escaped"
! grep -qF '<3>' "$tmp/page.html" || fail "/: a name went out unescaped"

chromium_run ()
{
  timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$tmp/chr" "$@" 2>>"$tmp/chromium.log"
}
chromium_run --screenshot="$tmp/page.png" --window-size=1024,768 "$url/" ||
  { cat "$tmp/chromium.log" >&2; fail "chromium --screenshot failed"; }
[ -f "$tmp/page.png" ] || fail "no screenshot"
size=$(stat -c %s "$tmp/page.png")
[ "$size" -gt 20000 ] || fail "screenshot of only $size bytes"
[ "$(head -c 8 "$tmp/page.png" | od -An -tx1 | tr -d ' \n')" = \
  89504e470d0a1a0a ] || fail "the screenshot is not a PNG"
[ -z "${HHC_WEB_SCREENSHOT:-}" ] || cp "$tmp/page.png" "$HHC_WEB_SCREENSHOT"
chromium_run --dump-dom "$url/" >"$tmp/dom.html" ||
  { cat "$tmp/chromium.log" >&2; fail "chromium --dump-dom failed"; }
for name in '>vm1<' '>db-2<' '>odd "vol" &lt;3&gt;<' 'log2.img'; do
  grep -qF "$name" "$tmp/dom.html" || fail "the rendered page lacks $name"
done

# The document is re-read on every request.
python3 - "$tmp/status.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["volumes"][1]["state"] = "running"
json.dump(d, open(sys.argv[1] + ".new", "w"))
EOF
mv "$tmp/status.json.new" "$tmp/status.json"
curl -sf "$url/metrics" >"$tmp/metrics"
grep -qxF 'hhc_volume_up{volume="db-2"} 1' "$tmp/metrics" ||
  fail "/metrics did not follow the new document"

# A status that cannot be read: 503; one that does not parse: 500.
mv "$tmp/status.json" "$tmp/status.json.away"
[ "$(status_of GET /metrics)" = 503 ] || fail "unreadable status: not 503"
echo '{"volumes": [' >"$tmp/status.json"
[ "$(status_of GET /metrics)" = 500 ] || fail "malformed status: not 500"
[ "$(status_of GET /status)" = 200 ] || fail "/status passes the text on"

stop_httpd_serve

# A bad address: no server, one line saying why.
if "$serve" -a 'not-an-address' "$tmp/status.json" "$tmp/port2" \
     >"$tmp/bad.log" 2>&1; then
  fail "httpd-serve started on a bad address"
fi
grep -q 'not-an-address.*not a numeric' "$tmp/bad.log" ||
  fail "bad address: $(cat "$tmp/bad.log")"

# IPv6, where the machine has ::1.
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
  mv "$tmp/status.json.away" "$tmp/status.json"
  start_httpd_serve "$serve" "$tmp/status.json" -a ::1
  curl -sf "http://[::1]:$httpd_port/metrics" >"$tmp/metrics"
  grep -qxF 'hhc_volume_up{volume="vm1"} 1' "$tmp/metrics" ||
    fail "no metrics over IPv6"
  stop_httpd_serve
fi
