#!/usr/bin/env bash
# A log mirror left out of a run is stale: given alone later, it must
# not be redone into the cache over FLUSHed writes.  The cache records
# the superblock generation its log's mirrors got at the start of each
# run (and at a clean close); a log older than that is refused when the
# last run's log is to be redone (ssd-sync=checkpoint after a crash),
# and used with a warning otherwise (the cache holds everything).  x is
# block 5; mode hhc with ssd-sync=checkpoint throughout.
#   1. mirrors a and b: x=A, FLUSH, clean stop.
#   2. a alone: x=B, FLUSH, kill -9 (B is in a's log only).
#   3. b alone: refused (the error names b.log), nothing changed.
#   4. a alone: x reads B (redone from a); x=C, FLUSH; 30 MiB more
#      through the 16 MiB log (its head moves: a's superblock
#      generation goes on past the run's first); clean stop.
#   5. b alone: starts with a warning naming b.log; x reads C; x=D,
#      FLUSH, kill -9 (D is in b's log only).
#   6. a and b: x reads D (b's generation is above a's: it is the log
#      redone, and a joins it); clean stop.
#   7. a alone with ssd-sync=flush: x=E, 30 MiB more (a's superblock
#      generation goes on past the start's, unrecorded), kill -9.
#   8. b alone: a warning (no redo is owed); x reads E; x=F, FLUSH,
#      kill -9.
#   9. a and b: x reads F (b's run is newer than a's, though a's count
#      of superblock writes went further: the epoch decides).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh md5sum
hhc=$(filter)
make_tmpdir

export X=$(( 5 * 4096 ))
truncate -s 16M "$tmp/backend.img"

# gw_args MIRROR...: set gw, the gateway with log= each MIRROR (and
# ssd-sync=$SYNC, default checkpoint).
gw_args ()
{
  local m
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/cache.img"
      cache-size=8M backend-id=stale-mirror idle-ms=0 dirty-low=90
      dirty-high=95 ssd-sync="${SYNC:-checkpoint}" log-size=16M)
  for m in "$@"; do gw+=(log="$tmp/$m.log"); done
}

# traffic: 30 MiB through the 16 MiB log, x untouched (the log's head
# moves: superblock writes).
traffic ()
{
  nbdsh_u "$tmp/sock" -c '
for i in range(2):
    for off in range(1 << 20, 16 << 20, 1 << 20):
        h.pwrite(bytes([i + 1]) * (1 << 20), off)
        h.flush()
'
}

# b_warned EXPECT NEW: start on b alone, which must warn that it was
# left out of a later run; x reads EXPECT; write x=NEW, FLUSH, kill -9.
b_warned ()
{
  gw_args b
  start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
  grep -q 'warning: log= .*b\.log: .*left out' "$tmp/nbdkit-$_hhc_nlogs.log" ||
    fail "no warning that b.log was left out of a later run (x=$2)"
  put_x "$2" "$1"
  kill9_nbdkit "$tmp/pid"
}

# 1.
gw_args a b
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x A
stop_nbdkit "$tmp/pid"

# 2.
gw_args a
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x B A
kill9_nbdkit "$tmp/pid"

# 3.
(cd "$tmp" && md5sum cache.img a.log b.log >sums)
gw_args b
rm -f "$tmp/rsock"
expect_fail_with 'b\.log.*generation.*left out' \
  timeout 60 nbdkit -f -U "$tmp/rsock" "${gw[@]}"
(cd "$tmp" && md5sum -c --quiet sums) ||
  fail "the refused start with the stale mirror changed a file"

# 4.
gw_args a
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x C B
traffic
stop_nbdkit "$tmp/pid"

# 5.
b_warned C D

# 6.
gw_args a b
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x D D
stop_nbdkit "$tmp/pid"

# 7.
SYNC=flush gw_args a
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x E D
traffic
kill9_nbdkit "$tmp/pid"

# 8.
b_warned E F

# 9.
gw_args a b
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
put_x F F
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
