#!/usr/bin/env bash
# ssd-sync=checkpoint after an unclean stop: the log is redone into the
# cache (FLUSHes since the cache's last commit are in the log only).  A
# start whose log cannot be redone (blank, or a stale mirror) is
# refused, and changes nothing, unless log-lost=accept: then it starts
# from the cache's last commit, with an error saying what is lost.  x
# is block 5.
#   1. a: x=A, FLUSH, x=B, FLUSH, kill -9.
#   2. a blank: refused (the error names a.log and log-lost=accept);
#      the cache and the blank a.log unchanged (not formatted).
#   3. the same with log-lost=accept: starts, with the error; x reads
#      zeros, A or B (the cache as last committed); x=C, FLUSH, clean
#      stop.  Then without it: x reads C.
#   4. a and b: x=D, FLUSH, clean stop; a alone: x=E, FLUSH, clean stop
#      (the cache commits E); a alone: x=F, FLUSH, kill -9.
#   5. b alone (stale): refused; with log-lost=accept: a warning that
#      it is not redone, and x reads E or F (D if b's log were redone);
#      x=G, FLUSH, kill -9; b alone again, no log-lost=: x reads G (b's
#      log is the newest now, redone); x=H, FLUSH, clean stop.
#   6. c (blank: a new log, no redo owed): x=I, FLUSH, kill -9.  b (an
#      older log of this cache) is refused, changing nothing; with
#      log-lost=accept it starts with the error.
#   7. A cache formatted in mode wb (no log), then hhc with log d:
#      x=J, FLUSH, kill -9; d blank: refused; with log-lost=accept the
#      error says what is lost.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh md5sum cmp
hhc=$(filter)
make_tmpdir

export X=$(( 5 * 4096 ))
truncate -s 16M "$tmp/backend.img"

# gw_args MIRROR... [-- PARAM...]: set gw, the gateway with log= each
# MIRROR and ssd-sync=checkpoint, then each PARAM.
gw_args ()
{
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/cache.img"
      cache-size=8M backend-id=log-lost idle-ms=0 dirty-low=90
      dirty-high=95 ssd-sync=checkpoint log-size=16M)
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    gw+=(log="$tmp/$1.log")
    shift
  done
  [ $# -eq 0 ] || { shift; gw+=("$@"); }
}

start_gw () { start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"; }
last_log () { cat "$tmp/nbdkit-$_hhc_nlogs.log"; }

# 1.
gw_args a
start_gw
put_x A
put_x B A
kill9_nbdkit "$tmp/pid"

# 2.
mv "$tmp/a.log" "$tmp/a.saved"
truncate -s 16M "$tmp/a.log"
refused_unchanged 'a\.log is blank or voided.*log-lost=accept'
cmp -s -n $(( 16 << 20 )) "$tmp/a.log" /dev/zero ||
  fail "the refused start wrote to the blank a.log"

# 3.
gw_args a -- log-lost=accept
start_gw
last_log | grep -q 'error: .*log is gone or stale.*log-lost=accept' ||
  fail "no error saying what log-lost=accept lost"
put_x C 0 A B
stop_nbdkit "$tmp/pid"
gw_args a
start_gw
put_x C C
stop_nbdkit "$tmp/pid"

# 4.
rm -f "$tmp/a.saved" "$tmp/b.log"
gw_args a b
start_gw
put_x D C
stop_nbdkit "$tmp/pid"
gw_args a
start_gw
put_x E D
stop_nbdkit "$tmp/pid"
start_gw
put_x F E
kill9_nbdkit "$tmp/pid"

# 5.
gw_args b
refused_unchanged 'b\.log.*generation.*log-lost=accept'
gw_args b -- log-lost=accept
start_gw
last_log | grep -q 'warning: log= .*b\.log: .*not redone (log-lost=accept)' ||
  fail "no warning that b.log is not redone"
put_x G E F
kill9_nbdkit "$tmp/pid"
gw_args b
start_gw
put_x H G
stop_nbdkit "$tmp/pid"

# 6.
gw_args c
start_gw
put_x I H
kill9_nbdkit "$tmp/pid"
gw_args b
refused_unchanged 'b\.log is not the log it last ran with.*log-lost=accept'
gw_args b -- log-lost=accept
start_gw
last_log | grep -q 'error: .*log is gone or stale.*log-lost=accept' ||
  fail "no error saying what log-lost=accept lost (an older log)"
put_x J H I
stop_nbdkit "$tmp/pid"

# 7.
rm -f "$tmp/cache.img" "$tmp/a.log" "$tmp/b.log" "$tmp/c.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" --filter="$hhc" file \
  "$tmp/backend.img" cache="$tmp/cache.img" cache-size=8M mode=wb \
  backend-id=log-lost
stop_nbdkit "$tmp/pid"
gw_args d
start_gw
put_x K
kill9_nbdkit "$tmp/pid"
rm -f "$tmp/d.log"
truncate -s 16M "$tmp/d.log"
refused_unchanged 'd\.log is blank or voided.*log-lost=accept'
gw_args d -- log-lost=accept
start_gw
last_log | grep -q 'error: .*log is gone or stale.*log-lost=accept' ||
  fail "no error saying what log-lost=accept lost (a cache formatted in wb)"
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
