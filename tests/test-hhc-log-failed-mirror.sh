#!/usr/bin/env bash
# A log mirror that fails during a run and is not voided before a crash
# (its device is unreachable) keeps that run's superblock generation on
# disk.  Given alone at the next start, it must not pass for the log:
# FLUSHes after its failure are only on the other mirrors.  Before such
# a FLUSH is acknowledged the healthy mirrors get a newer superblock
# and the cache records its generation (record_failures), so
# the failed mirror is refused (a redo is owed) or warned about.  x is
# block 5; mirror a is an NBD server (killed to fail it), b a file.
#   1. ssd-sync=checkpoint, a and b: x=A, FLUSH; a's server is killed;
#      x=B, FLUSH (B is in b's log only); the gateway is killed.
#   2. a alone (its file): refused, the error names a.log; nothing
#      changed.
#   3. a and b: x reads B (b's chain is the log); clean stop.
#   4. ssd-sync=flush, a (served again) and b: x=C, FLUSH; a's server
#      is killed; x=D, FLUSH; the gateway is killed.
#   5. a alone: starts with a warning naming a.log (no redo is owed:
#      the cache holds D); x reads D; x=E, FLUSH, clean stop.
#   6. ssd-sync=checkpoint, a (served) and b: x=F, FLUSH; a's server is
#      killed; x=G, FLUSH; a's server comes back and the gateway voids
#      a (its stats say so); kill -9.  a alone: refused (blank or
#      voided, and a redo is owed), nothing changed; a and b: x reads G.
#   7. ssd-sync=flush, a (served) and b: x=P, FLUSH; a's server is
#      killed; x=Q, FLUSH; drained (Q on the backend); clean stop.
#      format=force with a alone: refused (replaying it would write P
#      over the backend), nothing changed; with log-lost=accept: formats
#      without the replay, x reads Q.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh md5sum
hhc=$(filter)
make_tmpdir

export X=$(( 5 * 4096 ))
truncate -s 16M "$tmp/backend.img" "$tmp/a.log" "$tmp/b.log"

# gw_args MIRROR...: set gw, the gateway with log= each MIRROR (and
# ssd-sync=$SYNC, default checkpoint).
gw_args ()
{
  local m
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/cache.img"
      cache-size=8M backend-id=failed-mirror idle-ms=0 dirty-low=90
      dirty-high=95 ssd-sync="${SYNC:-checkpoint}" log-size=16M)
  for m in "$@"; do gw+=(log="$m"); done
}

# a_failed UNVOIDED: the gateway's stats say a mirror failed (the
# FLUSH put made saw it), and UNVOIDED (1 or 0) are not voided.
a_failed ()
{
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["log"]
sys.exit(not (s["mirrors_failed"] == 1 and
              s["mirrors_unvoided"] == int(sys.argv[2])))' \
    "$tmp/stats.json" "$1"
}

serve_a ()
{
  rm -f "$tmp/a.sock"
  start_nbdkit -P "$tmp/a.pid" -U "$tmp/a.sock" file "$tmp/a.log"
}

# a_fails V0 V1 [EXPECT]: the gateway on a (NBD) and b, with stats and
# a control socket; x=V0, FLUSH; kill a's server; x=V1, FLUSH.
a_fails ()
{
  serve_a
  gw_args "$(nbd_uri "$tmp/a.sock")" "$tmp/b.log"
  gw+=(stats="$tmp/stats.json" control="$tmp/ctl")
  start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
  put_x "$1" "${3:-}"
  kill9_nbdkit "$tmp/a.pid"
  rm -f "$tmp/a.sock" # no void can reach it
  put_x "$2" "$1"
}

# run_with_a_failing V0 V1 [EXPECT]: a_fails, then kill -9 the gateway
# with a failed and not voided.
run_with_a_failing ()
{
  a_fails "$@"
  poll_until 30 a_failed 1 ||
    fail "the stats do not show mirror a failed and not voided"
  kill9_nbdkit "$tmp/pid"
}

# 1.
run_with_a_failing A B

# 2.
gw_args "$tmp/a.log"
refused_unchanged 'a\.log.*generation.*failed in'

# 3.
gw_args "$tmp/a.log" "$tmp/b.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x B B
stop_nbdkit "$tmp/pid"

# 4.
SYNC=flush run_with_a_failing C D B

# 5.
SYNC=flush gw_args "$tmp/a.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
grep -q 'warning: log= .*a\.log: .*failed in' "$tmp/nbdkit-$_hhc_nlogs.log" ||
  fail "no warning that a.log failed in the last run"
put_x E D
stop_nbdkit "$tmp/pid"

# 6.
a_fails F G E
serve_a
poll_until 30 a_failed 0 ||
  fail "the stats do not show mirror a voided within 30 s"
kill9_nbdkit "$tmp/pid"
kill9_nbdkit "$tmp/a.pid"
gw_args "$tmp/a.log"
refused_unchanged 'a\.log is blank or voided'
gw_args "$tmp/a.log" "$tmp/b.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x H G
stop_nbdkit "$tmp/pid"

# 7.
SYNC=flush a_fails P Q H
python3 - "$tmp/ctl" <<'EOF2'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"drain\n")
buf = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    buf += b
assert buf.rstrip().endswith(b"ok"), "drain: %r" % buf[-200:]
EOF2
cmp -s -i "$X:0" -n 4096 "$tmp/backend.img" <(printf 'Q%.0s' $(seq 4096)) ||
  fail "test setup: Q is not on the backend after the drain"
stop_nbdkit "$tmp/pid"
SYNC=flush gw_args "$tmp/a.log"
refused_unchanged 'format=force: log= .*a\.log is not the last run' format=force
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}" format=force \
  log-lost=accept
put_x R Q
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
