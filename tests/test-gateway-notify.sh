#!/usr/bin/env bash
# hhc-gateway's systemd notifications (sd_notify, Type=notify): run
# under a NOTIFY_SOCKET this test listens on (tests/notify-listen.py)
# with two file volumes, a and b, b's nbdkit held back by a gate.
#
#   - while b does not serve: STATUS= says 1/2 volumes up, no READY=1;
#   - READY=1 once b serves: when it arrives, the listener finds both
#     volumes' sockets accepting and nbdinfo --list showing both;
#   - WATCHDOG=1 pings (WATCHDOG_USEC set);
#   - SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1;
#   - SIGTERM: STOPPING=1, and hhc-gateway exits.
#
# Without NOTIFY_SOCKET nothing is sent: the other gateway tests run so.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo python3
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
[ -x "$gateway" ] || fail "$gateway: not built"
truncate -s 16M "$tmp/a.img" "$tmp/b.img"

# nbdkit for the volumes, b's first start held until the test writes a
# line into the FIFO $tmp/gate (at most 60 s): the gateway sees b
# starting, not serving.  Opened read-write, the FIFO does not block the
# open; once $tmp/gate.open exists, b starts at once.
mkfifo "$tmp/gate"
cat >"$tmp/nbdkit-gate" <<EOF
#!/usr/bin/env bash
case " \$* " in
  *" $tmp/run/b.sock "*)
    if [ ! -e "$tmp/gate.open" ]; then
      exec 3<>"$tmp/gate"
      read -r -t 60 -u 3 _ || true
      exec 3>&-
    fi ;;
esac
exec nbdkit "\$@"
EOF
chmod +x "$tmp/nbdkit-gate"

cat >"$tmp/gateway.json" <<EOF
{
  "listen": {"socket": "$tmp/front.sock"},
  "nbdkit": "$tmp/nbdkit-gate",
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$tmp/run",
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes": [
    {"name": "a", "backend": {"type": "file", "path": "$tmp/a.img"},
     "cache": "$tmp/a.cache", "cache_size": "4M", "backend_id": "a"},
    {"name": "b", "backend": {"type": "file", "path": "$tmp/b.img"},
     "cache": "$tmp/b.cache", "cache_size": "4M", "backend_id": "b"}
  ]
}
EOF
truncate -s 4M "$tmp/a.cache" "$tmp/b.cache"

# The listener: one line per datagram in $tmp/notify.out; on each
# READY=1 it checks the volumes' sockets and runs nbdinfo --list.
python3 "$abs_top_srcdir/tests/notify-listen.py" "$tmp/notify.sock" \
  "$tmp/notify.out" "$tmp/front.sock" "$tmp/run/a.sock" \
  "$tmp/run/b.sock" 2>"$tmp/listen.err" &
listen_pid=$!
stop_listener ()
{
  kill "$listen_pid" 2>/dev/null || true
  wait "$listen_pid" 2>/dev/null || true
}
cleanup_fn stop_listener
poll_until 30 test -S "$tmp/notify.sock" ||
  fail "the listener did not bind: $(cat "$tmp/listen.err")"

export NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=400000
start_gateway "$gateway" "$tmp/gateway.json"
export -n NOTIFY_SOCKET WATCHDOG_USEC

seen ()
{
  grep -q -- "$1" "$tmp/notify.out" 2>/dev/null
}
count ()
{
  grep -c -- "$1" "$tmp/notify.out" 2>/dev/null || true
}
# at_least N REGEX: N lines or more match REGEX
at_least ()
{
  [ "$(count "$2")" -ge "$1" ]
}

# b is held: a serves, b does not, and there is no READY=1.
poll_until 60 seen '^STATUS=1/2 volumes up, 0 bytes dirty$' ||
  fail "no STATUS=1/2 volumes up: $(cat "$tmp/notify.out")"
! seen '^READY=1$' || fail "READY=1 while b did not serve"
[ "$(count '^STATUS=')" -le 3 ] ||
  fail "STATUS= sent without a change: $(cat "$tmp/notify.out")"

# Let b start: READY=1, and both served when it came.
touch "$tmp/gate.open"
echo go >"$tmp/gate"
poll_until 60 seen '^listed ' ||
  fail "no READY=1 once b served: $(cat "$tmp/notify.out")"
grep -q "^serving $tmp/run/a.sock:yes $tmp/run/b.sock:yes$" \
  "$tmp/notify.out" ||
  fail "a volume did not serve when READY=1 came: $(cat "$tmp/notify.out")"
grep -q '^listed 2 a b$' "$tmp/notify.out" ||
  fail "nbdinfo --list did not show a and b at READY=1: $(cat "$tmp/notify.out")"
seen '^STATUS=2/2 volumes up, 0 bytes dirty$' ||
  fail "no STATUS=2/2 volumes up: $(cat "$tmp/notify.out")"

# The watchdog: a ping every 200 ms.
poll_until 30 at_least 3 '^WATCHDOG=1$' ||
  fail "fewer than 3 WATCHDOG=1: $(cat "$tmp/notify.out")"

# SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
kill -HUP "$gw_pid"
poll_until 60 at_least 2 '^READY=1$' ||
  fail "no READY=1 after SIGHUP: $(cat "$tmp/notify.out")"
grep -v '^WATCHDOG=1$' "$tmp/notify.out" >"$tmp/events"
grep -A1 '^RELOADING=1;MONOTONIC_USEC=[0-9]*$' "$tmp/events" >"$tmp/reload"
grep -qx 'READY=1' "$tmp/reload" ||
  fail "no RELOADING=1 then READY=1: $(cat "$tmp/notify.out")"
[ "$(grep -n '^RELOADING=1' "$tmp/notify.out" | cut -d: -f1)" -gt \
  "$(grep -n '^READY=1$' "$tmp/notify.out" | head -1 | cut -d: -f1)" ] ||
  fail "RELOADING=1 before the first READY=1: $(cat "$tmp/notify.out")"

# SIGTERM: STOPPING=1, and the gateway exits.
kill -TERM "$gw_pid"
poll_until 60 seen '^STOPPING=1;STATUS=stopping' ||
  fail "no STOPPING=1: $(cat "$tmp/notify.out")"
poll_until 60 eval '! kill -0 "$gw_pid" 2>/dev/null' ||
  fail "hhc-gateway did not exit after SIGTERM"
st=0
wait "$gw_pid" || st=$?
[ "$st" -eq 0 ] || fail "hhc-gateway exited with status $st"
