#!/usr/bin/env bash
# Mode hhc: a log mirror that failed is voided (made blank) once it
# takes writes again, so that a later loss of the SSD never replays
# its stale contents over what the fallback FLUSHes wrote back.
#
# The only log mirror is served over NBD through nbdkit's error
# filter: its writes fail while $tmp/fail exists.  x is block 5.
#   flush   write x=A, FLUSH; fail on; write x=B, FLUSH (no mirror
#           left: the fallback writes x=B back); fail off; write y=C,
#           FLUSH; kill -9; the SSD is lost; restart on a new cache
#           with the same log: x must read B (a replay of the stale
#           log would bring back A), y C.
#   heal    the same up to the fallback FLUSH; fail off, and no FLUSH
#           follows: the stats must show, within 30 s, the failed
#           mirror voided (log.mirrors_unvoided 0); then kill -9, the
#           SSD lost, restart: x must read B.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
hhc=$(filter)
make_tmpdir

export FAIL=$tmp/fail X=$(( 5 * 4096 )) Y=$(( 9 * 4096 ))

prelude='
import json, os, time
x, y = int(os.environ["X"]), int(os.environ["Y"])
A, B, C = b"A" * 4096, b"B" * 4096, b"C" * 4096
def fail_on():
    open(os.environ["FAIL"], "w").close()
def fail_off():
    os.unlink(os.environ["FAIL"])
'

# start_log DIR: the log mirror DIR/log.img on DIR/log.sock.
start_log ()
{
  truncate -s 16M "$1/log.img"
  start_nbdkit -P "$1/log.pid" -U "$1/log.sock" --filter=error \
    file "$1/log.img" error=EIO error-pwrite-rate=100% error-file="$FAIL"
}

# start_gw DIR CACHE: the gateway on DIR/backend.img, cache DIR/CACHE,
# the log of start_log.  No write-back (idle-ms=0, high watermarks):
# only the fallback FLUSHes write blocks back.
start_gw ()
{
  start_nbdkit -P "$1/gw.pid" -U "$1/gw.sock" \
    --filter="$hhc" file "$1/backend.img" cache="$1/$2" cache-size=8M \
    mode=hhc log="$(nbd_uri "$1/log.sock")" backend-id=log-void \
    idle-ms=0 dirty-low=90 dirty-high=95 stats="$1/stats.json"
}

# stats_ok DIR PYTHON-EXPR: the expression on the stats (s) is true.
stats_ok ()
{
  python3 -c 'import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(1)
sys.exit(not eval(sys.argv[2]))' "$1/stats.json" "$2"
}

# lose_ssd_and_check DIR: kill -9, delete the cache, restart on a new
# one with the same log, and check x and y.
lose_ssd_and_check ()
{
  local d=$1 want_y=$2
  kill9_nbdkit "$d/gw.pid"
  rm -f "$d/cache.img"
  start_gw "$d" cache2.img
  WANT_Y=$want_y nbdsh_u "$d/gw.sock" -c "$prelude" -c '
got = h.pread(4096, x)
assert got != A, \
    "x reads A after the SSD was lost: the stale log of the failed " \
    "mirror was replayed over B"
assert got == B, "x reads neither A nor B"
if os.environ["WANT_Y"]:
    assert h.pread(4096, y) == C, "y lost"
'
  stop_nbdkit "$d/gw.pid"
}

# The first steps of both cases: x=A logged, then x=B by the fallback.
mkdir "$tmp/flush" "$tmp/heal"
for d in "$tmp/flush" "$tmp/heal"; do
  truncate -s 16M "$d/backend.img"
  start_log "$d"
  start_gw "$d" cache.img
done

# ---- flush ----
d=$tmp/flush
nbdsh_u "$d/gw.sock" -c "$prelude" -c '
h.pwrite(A, x)
h.flush()
fail_on()
h.pwrite(B, x)
h.flush()
fail_off()
h.pwrite(C, y)
h.flush()
'
poll_until 30 stats_ok "$d" 's["log"]["mirrors_failed"] == 1' ||
  fail "flush: the stats do not show the log mirror failed"
lose_ssd_and_check "$d" yes

# ---- heal ----
d=$tmp/heal
nbdsh_u "$d/gw.sock" -c "$prelude" -c '
h.pwrite(A, x)
h.flush()
fail_on()
h.pwrite(B, x)
h.flush()
fail_off()
'
poll_until 30 stats_ok "$d" \
  's["log"]["mirrors_failed"] == 1 and s["log"].get("mirrors_unvoided") == 0' ||
  fail "heal: the failed mirror was not voided within 30 s (stats log:" \
       "$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1])).get("log"))' "$d/stats.json"))"
lose_ssd_and_check "$d" ''
echo "$_hhc_name: ok"
