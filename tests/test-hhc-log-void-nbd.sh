#!/usr/bin/env bash
# Mode hhc: the only log mirror is an NBD server that dies (its
# connection is gone: libnbd never reconnects a handle) and comes back
# on the same socket.  The gateway must still void it, dialling the
# server again (the writer, within seconds: dials back off), so that a
# later loss of the SSD never replays its stale log.
#
#   write x=A, FLUSH (A in the log); kill -9 the log server; write x=B,
#   FLUSH (no mirror left: B written back); start the log server
#   again; write y=C, FLUSH; the stats must show, within 30 s, the
#   mirror voided (log.mirrors_unvoided 0); kill -9 the gateway; the
#   SSD is lost; restart on a new cache with the same log: x must read
#   B (a replay of the stale log would bring back A), y C.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
hhc=$(filter)
make_tmpdir

export X=$(( 5 * 4096 )) Y=$(( 9 * 4096 ))
prelude='
import os
x, y = int(os.environ["X"]), int(os.environ["Y"])
A, B, C = b"A" * 4096, b"B" * 4096, b"C" * 4096
'

truncate -s 16M "$tmp/backend.img" "$tmp/log.img"

start_log ()
{
  start_nbdkit -P "$tmp/log.pid" -U "$tmp/log.sock" file "$tmp/log.img"
}

# start_gw CACHE: no write-back but the FLUSHes' (idle-ms=0, high
# watermarks).
start_gw ()
{
  start_nbdkit -P "$tmp/gw.pid" -U "$tmp/gw.sock" \
    --filter="$hhc" file "$tmp/backend.img" cache="$tmp/$1" cache-size=8M \
    mode=hhc log="$(nbd_uri "$tmp/log.sock")" backend-id=log-void-nbd \
    idle-ms=0 dirty-low=90 dirty-high=95 stats="$tmp/stats.json"
}

# The stats say the failed mirror is voided.
voided ()
{
  python3 -c 'import json, sys
try:
    s = json.load(open(sys.argv[1]))["log"]
except (OSError, ValueError, KeyError):
    sys.exit(1)
sys.exit(not (s["mirrors_failed"] == 1 and s["mirrors_unvoided"] == 0))' \
    "$tmp/stats.json"
}

start_log
start_gw cache.img
nbdsh_u "$tmp/gw.sock" -c "$prelude" -c '
h.pwrite(A, x)
h.flush()
'
kill9_nbdkit "$tmp/log.pid"
nbdsh_u "$tmp/gw.sock" -c "$prelude" -c '
h.pwrite(B, x)
h.flush()
'
rm -f "$tmp/log.sock"
start_log
nbdsh_u "$tmp/gw.sock" -c "$prelude" -c '
h.pwrite(C, y)
h.flush()
'
poll_until 30 voided ||
  fail "the dead NBD mirror was not voided within 30 s after its server" \
       "came back"
kill9_nbdkit "$tmp/gw.pid"
rm -f "$tmp/cache.img" "$tmp/gw.sock"
start_gw cache2.img
nbdsh_u "$tmp/gw.sock" -c "$prelude" -c '
got = h.pread(4096, x)
assert got != A, \
    "x reads A after the SSD was lost: the stale log of the dead NBD " \
    "mirror was replayed over B (it was not voided when it came back)"
assert got == B, "x reads neither A nor B"
assert h.pread(4096, y) == C, "y lost"
'
echo "$_hhc_name: ok"
