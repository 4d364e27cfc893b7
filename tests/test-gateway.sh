#!/usr/bin/env bash
# The appliance, hhc-gateway, with two volumes on loopback: a file
# backend (mode hhc with an HDD log) and a cos backend on s3rver (mode
# wb).  nbdinfo lists both exports; data round-trips through each;
# kill -9 of one volume's nbdkit: it is restarted and its flushed data
# is intact, while the other volume keeps serving; hhcctl status and
# drain; SIGHUP adds a third volume and leaves the others running;
# SIGTERM stops everything cleanly (each cache closed clean).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io python3 curl
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/s3.sh"
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
[ -x "$gateway" ] || fail "$gateway: not built"
plugins=$abs_top_builddir/.libs

start_s3rver vols
printf '%s\n%s\n' "$s3_access_key" "$s3_secret_key" >"$tmp/cos.cred"
chmod 600 "$tmp/cos.cred"

read -r nbd_port http_port < <(free_ports 2)
truncate -s 32M "$tmp/a.img" "$tmp/c.img"

# write_config N [VARIANT...]: a config with the first N of the volumes
# a, b, c; change-c gives c another tuning, drop-b leaves b out.
write_config ()
{
  python3 - "$@" >"$tmp/gateway.json.tmp" <<EOF
import json, sys
n = int(sys.argv[1])
variants = sys.argv[2:]
vols = [
  {"name": "a", "backend": {"type": "file", "path": "$tmp/a.img"},
   "cache": "$tmp/a.cache", "cache_size": "8M",
   "log": ["$tmp/a.log"], "log_size": "40M", "backend_id": "a",
   "tuning": {"dirty-low": 90, "dirty-high": 95, "dirty-max": 99,
              "idle-ms": 0}},
  {"name": "b", "backend": {"type": "cos", "endpoint": "$s3_endpoint",
   "bucket": "vols", "prefix": "b", "size": "16M",
   "credentials": "$tmp/cos.cred"},
   "cache": "$tmp/b.cache", "cache_size": "8M", "mode": "wb",
   "drain_on_stop": True},
  {"name": "c", "backend": {"type": "file", "path": "$tmp/c.img"},
   "cache": "$tmp/c.cache", "cache_size": "8M", "backend_id": "c"},
]
if "change-c" in variants:
  vols[2]["tuning"] = {"dirty-high": 70}
print(json.dumps({
  "listen": {"address": "127.0.0.1", "port": $nbd_port},
  "filter": "$hhc", "plugin_dir": "$plugins",
  "run_dir": "$tmp/run",
  "metrics": {"address": "127.0.0.1", "port": $http_port},
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes": [v for v in vols[:n]
              if not ("drop-b" in variants and v["name"] == "b")]},
  indent=2))
EOF
  mv "$tmp/gateway.json.tmp" "$tmp/gateway.json"
}

write_config 2
"$gateway" -c "$tmp/gateway.json" --check | grep -q ': ok, 2 volumes' ||
  fail "--check did not accept the config"
start_gateway "$gateway" "$tmp/gateway.json"

uri ()
{
  printf 'nbd://127.0.0.1:%s/%s' "$nbd_port" "$1"
}
status ()
{
  curl -sf --max-time 10 "http://127.0.0.1:$http_port/status"
}
# field VOLUME KEY: from /status
field ()
{
  status | python3 -c 'import json, sys
d = json.load(sys.stdin)
v = [x for x in d["volumes"] if x["name"] == sys.argv[1]][0]
print(v[sys.argv[2]])' "$1" "$2"
}
running ()
{
  local v
  for v in "$@"; do
    [ "$(field "$v" state 2>/dev/null)" = running ] || return 1
  done
}
listed ()
{
  timeout 10 nbdinfo --list "$(uri a)" 2>/dev/null >"$tmp/list" &&
    [ "$(grep -c '^export=' "$tmp/list")" -eq "$1" ]
}

poll_until 60 running a b || fail "the volumes did not come up: $(status)"
poll_until 30 listed 2 || fail "nbdinfo --list did not list 2 exports"
grep -q '^export="a":' "$tmp/list" && grep -q '^export="b":' "$tmp/list" ||
  fail "the exports are not a and b: $(cat "$tmp/list")"

# A round trip through each volume, flushed.
qemu-io -f raw -t writeback "$(uri a)" -c 'write -P 0xa1 1M 2M' \
  -c 'write -P 0xa2 4097 5000' -c flush >/dev/null
qemu-io -f raw -t writeback "$(uri b)" -c 'write -P 0xb1 3M 1M' \
  -c flush >/dev/null
truncate -s 32M "$tmp/a.expected"
apply_ops "$tmp/a.expected" 'write -P 0xa1 1M 2M' 'write -P 0xa2 4097 5000'
check_a ()
{
  nbdsh -u "$(uri a)" \
    -c "assert h.pread(h.get_size(), 0) == open('$tmp/a.expected', 'rb').read()"
}
check_a || fail "volume a does not read back what was written"
qemu-io -f raw "$(uri b)" -c 'read -P 0xb1 3M 1M' | grep -q 'read 1048576' ||
  fail "volume b does not read back what was written"

# hhcctl status and drain, through the volumes' control sockets.
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
"$hhcctl" status --run-dir "$tmp/run" >"$tmp/status.txt" ||
  fail "hhcctl status failed"
grep -q '^a ' "$tmp/status.txt" && grep -q '^b ' "$tmp/status.txt" ||
  fail "hhcctl status does not show both volumes: $(cat "$tmp/status.txt")"
dirty_a ()
{
  status | python3 -c 'import json, sys
print([v for v in json.load(sys.stdin)["volumes"] if v["name"] == "a"][0]["stats"]["dirty"])'
}
# Write-back waits for 90% dirty on a (and never for idleness, idle-ms
# 0: a slow machine takes more than a second between the writes and
# here), of the cache and of the log (40M: with 8M, the log's room for
# dirty blocks next to its 1M segments' reserve is below the 2M
# written, and write-back started at once: the check raced with it and
# lost on a loaded CI machine): its blocks are all still dirty.
[ "$(dirty_a)" -gt 0 ] || fail "volume a has no dirty block to drain"
"$hhcctl" drain --run-dir "$tmp/run" a >/dev/null 2>&1 ||
  fail "hhcctl drain a failed"
[ "$(dirty_a)" -eq 0 ] || fail "hhcctl drain left dirty blocks"

# kill -9 of volume a's nbdkit: b keeps serving while a is restarted
# (recovering its cache and log), then a's flushed data is intact.
old_pid=$(field a pid)
kill -9 "$old_pid"
qemu-io -f raw "$(uri b)" -c 'read -P 0xb1 3M 1M' | grep -q 'read 1048576' ||
  fail "volume b stopped serving while a was down"
restarted ()
{
  running a && [ "$(field a pid)" != "$old_pid" ] &&
    [ "$(field a restarts)" -ge 1 ]
}
poll_until 60 restarted || fail "volume a was not restarted: $(status)"
check_a || fail "volume a lost flushed data across kill -9 and restart"
grep -q 'volume a: nbdkit .* killed by signal 9' "$tmp/gateway.log" ||
  fail "the gateway did not log the crash"

# SIGHUP with a third volume: it is started, a and b keep their pids.
pid_a=$(field a pid)
pid_b=$(field b pid)
write_config 3
kill -HUP "$gw_pid"
poll_until 60 running c || fail "SIGHUP did not start volume c: $(status)"
poll_until 30 listed 3 || fail "nbdinfo --list does not show 3 exports"
[ "$(field a pid)" = "$pid_a" ] && [ "$(field b pid)" = "$pid_b" ] ||
  fail "SIGHUP restarted volumes that did not change"
qemu-io -f raw -t writeback "$(uri c)" -c 'write -P 0xc1 0 64k' -c flush \
  >/dev/null

# SIGHUP with c changed: c is restarted, a and b are left alone.
pid_c=$(field c pid)
write_config 3 change-c
kill -HUP "$gw_pid"
c_restarted ()
{
  running c && [ "$(field c pid)" != "$pid_c" ]
}
poll_until 60 c_restarted || fail "SIGHUP did not restart the changed c"
[ "$(field a pid)" = "$pid_a" ] && [ "$(field b pid)" = "$pid_b" ] ||
  fail "SIGHUP restarted a or b when only c changed"
nbdsh -u "$(uri c)" -c "assert h.pread(65536, 0) == b'\\xc1' * 65536" ||
  fail "volume c lost its flushed data across its restart"

# SIGHUP with b removed: b (drain_on_stop) is drained and stopped, and
# leaves the export list; a and c are left alone.
pid_c=$(field c pid)
write_config 3 change-c drop-b
kill -HUP "$gw_pid"
poll_until 60 listed 2 || fail "SIGHUP did not remove volume b"
! grep -q '^export="b":' "$tmp/list" || fail "b is still listed"
_hhc_wait_gone "$pid_b" 60 || fail "b's nbdkit still runs after its removal"
grep -q 'volume b: drained' "$tmp/gateway.log" ||
  fail "volume b was not drained before its removal"
[ "$(field a pid)" = "$pid_a" ] && [ "$(field c pid)" = "$pid_c" ] ||
  fail "removing b restarted a or c"

# An invalid config on SIGHUP changes nothing.
echo '{"volumes": [' >"$tmp/gateway.json"
kill -HUP "$gw_pid"
poll_until 30 grep -q 'reload: .*gateway.json:.*kept' "$tmp/gateway.log" ||
  fail "a broken config on SIGHUP was not reported"
running a c || fail "a broken config on SIGHUP stopped volumes"

# SIGTERM: everything stops.
kill -TERM "$gw_pid"
st=0
_hhc_wait_gone "$gw_pid" 120 || fail "hhc-gateway did not stop on SIGTERM"
wait "$gw_pid" || st=$?
[ "$st" -eq 0 ] || fail "hhc-gateway exited with status $st on SIGTERM"
for p in "$pid_a" "$pid_c"; do
  ! kill -0 "$p" 2>/dev/null || fail "nbdkit $p still runs after SIGTERM"
done
[ ! -e "$tmp/run/exports" ] || fail "the export map was left behind"

# hhcctl drain wrote a's data back: the backend image itself holds it.
cmp "$tmp/a.img" "$tmp/a.expected" || fail "a's backend lacks the drained data"
echo "$_hhc_name: ok"
