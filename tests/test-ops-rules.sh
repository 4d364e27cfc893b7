#!/usr/bin/env bash
# The operations files against the metrics hhc-gateway really exports:
#
#   conf/prometheus/hhc-gateway-rules.yml   promtool check rules, and
#       promtool test rules on hhc-gateway-rules.test.yml (the mirror,
#       restart-loop, dirty and outage alerts fire where they should)
#   conf/grafana/hhc-gateway.json           parses, every panel has the
#       ${DS_PROMETHEUS} datasource and a target, its PromQL parses
#   both                                    every metric name they use
#       is in a /metrics scrape (tests/ops-metrics.py): the HTTP server
#       (tests/web/httpd-serve, as tests/test-gateway-web.sh runs it) on
#       a status document that has every field
#
# A misspelt name must be caught: the test checks that too, on a copy.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires curl promtool python3
if ! python3 -c 'import yaml' 2>/dev/null; then
  [ -z "${CI:-}" ] || fail "python3's yaml module is missing (python3-yaml)"
  echo "$0: SKIP: python3's yaml module is missing (python3-yaml)" >&2
  exit 77
fi
serve=${abs_top_builddir:-.}/tests/web/httpd-serve
[ -x "$serve" ] || fail "$serve: not built"
src=${abs_top_srcdir:-$(dirname "$0")/..}
rules=$src/conf/prometheus/hhc-gateway-rules.yml
dashboard=$src/conf/grafana/hhc-gateway.json
check=$src/tests/ops-metrics.py
make_tmpdir

promtool check rules "$rules" || fail "promtool check rules rejects $rules"
promtool test rules "$src/conf/prometheus/hhc-gateway-rules.test.yml" ||
  fail "promtool test rules: an alert does not fire as expected"

# Every field metrics.c reads: a volume with a log and two mirrors.
cat >"$tmp/status.json" <<'JSON'
{"gateway": {"version": "0.1", "uptime_s": 60, "config": "/etc/hhc/gateway.json"},
 "volumes": [
  {"name": "vm1", "state": "running", "pid": 1234, "restarts": 2,
   "backend": "file",
   "stats": {"mode": "hhc", "block_size": 4096, "slots": 1000, "free": 100,
     "clean": 800, "dirty": 100, "ram_bytes_per_block": 20.5,
     "read_hits": 9, "read_misses": 1, "write_hits": 3, "write_misses": 4,
     "bytes_read": 4096, "bytes_written": 8192, "evictions": 1,
     "writeback_blocks": 50, "writeback_backlog": 100,
     "writeback_errors": 0, "writeback_retries": 0, "backend_errors": 0,
     "stalls": 0, "log_fallbacks": 0, "flushes": 7, "flush_errors": 0,
     "backend_flush_failed": false,
     "flush_latency_buckets": [[127, 3], [1023, 7]],
     "log": {"barriers": 7, "syncs": 7, "blocks": 90, "full_waits": 0,
       "used_bytes": 4096, "region_bytes": 65536, "mirrors": 2,
       "mirrors_failed": 1, "mirrors_unvoided": 1,
       "mirror": [{"name": "/dev/sdb", "failed": false},
                  {"name": "/dev/sdc", "failed": true}]}}}]}
JSON

start_httpd_serve "$serve" "$tmp/status.json"
curl -sf "http://127.0.0.1:$httpd_port/metrics" >"$tmp/metrics" ||
  fail "no /metrics"
stop_httpd_serve
grep -q '^hhc_log_mirror_healthy{' "$tmp/metrics" &&
  grep -q '^hhc_flush_latency_seconds_bucket{' "$tmp/metrics" ||
  fail "the scrape lacks the mirror or histogram samples"

python3 "$check" "$tmp/metrics" "$rules" "$dashboard" "$tmp/dashboard.yml" ||
  fail "the rules or the dashboard name metrics /metrics lacks (above)"
promtool check rules "$tmp/dashboard.yml" >/dev/null ||
  fail "the dashboard's PromQL does not parse"

# The check itself: a misspelt name in the rules, and in the dashboard.
sed 's/hhc_log_mirror_healthy ==/hhc_log_mirror_heathy ==/' "$rules" \
  >"$tmp/bad-rules.yml"
sed 's/hhc_cache_dirty_slots{/hhc_cache_dirty_slot{/' "$dashboard" \
  >"$tmp/bad-dashboard.json"
! cmp -s "$rules" "$tmp/bad-rules.yml" &&
  ! cmp -s "$dashboard" "$tmp/bad-dashboard.json" ||
  fail "the misspelling did not apply"
if python3 "$check" "$tmp/metrics" "$tmp/bad-rules.yml" \
     "$tmp/bad-dashboard.json" "$tmp/bad.yml" >"$tmp/bad.out"; then
  fail "misspelt metric names were not caught"
fi
grep -q 'HHCLogMirrorFailed: hhc_log_mirror_heathy: not in /metrics' \
  "$tmp/bad.out" || fail "rules misspelling: $(cat "$tmp/bad.out")"
grep -q 'Dirty share.*hhc_cache_dirty_slot: not in /metrics' \
  "$tmp/bad.out" || fail "dashboard misspelling: $(cat "$tmp/bad.out")"
