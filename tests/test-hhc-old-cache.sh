#!/usr/bin/env bash
# An older copy of the cache device given with its log (an image put
# back, a snapshot restored, an SSD that lost writes it had
# acknowledged) is refused, changing nothing, in mode hhc and in a mode
# that would retire the log; format=force rebuilds the cache from the
# log.  x is block 5.
#   1. a and b: x=A, FLUSH, clean stop; the cache file is copied (old).
#   2. x=B, FLUSH, kill -9; x=C (B read), FLUSH, clean stop.
#   3. old put back: mode hhc refused (the error names the later run and
#      format=force), no file changed; mode wb with a and b (which would
#      write A back and void the log) refused too; hhcctl check says so
#      (exit 1, the gateway's message).
#   4. format=force with a and b: x reads C; x=D, FLUSH, clean stop;
#      then a plain start reads D: x=E, FLUSH, clean stop.
#   5. An older copy than a retirement: the cache file copied (old2);
#      mode wb with a and b retires the log (E written back, a and b
#      voided): x=F, FLUSH, clean stop.  old2 put back: mode hhc with a
#      and b refused, no file changed (it started on a new log and read
#      E: the voids carried the epoch old2 knew); mode wb refused too;
#      hhcctl check says so.  The current cache back: mode wb reads F,
#      and hhcctl check does not say so.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh md5sum
hhc=$(filter)
hhcctl=${abs_top_builddir:?}/appliance/hhcctl
[ -x "$hhcctl" ] || fail "$hhcctl: not built"
make_tmpdir

export X=$(( 5 * 4096 ))
truncate -s 16M "$tmp/backend.img"

# gw_args PARAM...: set gw, the gateway with log= a and b, then PARAM.
gw_args ()
{
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/cache.img"
      cache-size=8M backend-id=old-cache idle-ms=0 dirty-low=90
      dirty-high=95 log-size=16M log="$tmp/a.log" log="$tmp/b.log" "$@")
}

start_gw () { start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"; }

# check_says STATUS PATTERN: hhcctl check of the cache and both mirrors
# exits STATUS; its output matches PATTERN (STATUS 1), or not (0).
check_says ()
{
  local st=0
  "$hhcctl" check --cache "$tmp/cache.img" --log "$tmp/a.log" \
    --log "$tmp/b.log" >"$tmp/check.out" 2>&1 || st=$?
  cat "$tmp/check.out"
  [ "$st" = "$1" ] || fail "hhcctl check exited $st, not $1"
  if [ "$1" = 1 ]; then
    grep -Eq -- "$2" "$tmp/check.out" || fail "hhcctl check missed /$2/"
    if grep -q "cache is blank" "$tmp/check.out"; then
      fail "hhcctl check took the older copy for a blank cache"
    fi
  elif grep -Eq -- "$2" "$tmp/check.out"; then
    fail "hhcctl check said /$2/ of the current cache"
  fi
}

# 1.
gw_args
start_gw
put_x A
stop_nbdkit "$tmp/pid"
cp "$tmp/cache.img" "$tmp/old.img"

# 2.
start_gw
put_x B A
kill9_nbdkit "$tmp/pid"
start_gw
put_x C B
stop_nbdkit "$tmp/pid"

# 3.
cp "$tmp/old.img" "$tmp/cache.img"
refused_unchanged 'holds a run \(epoch [0-9]*\) later than any this cache knows of.*format=force'
gw_args mode=wb
refused_unchanged 'later than any this cache knows of.*format=force'
check_says 1 'holds a run \(epoch [0-9]*\) later than any this cache knows of'

# 4.
gw_args format=force
start_gw
put_x D C
stop_nbdkit "$tmp/pid"
gw_args
start_gw
put_x E D
stop_nbdkit "$tmp/pid"

# 5.
cp "$tmp/cache.img" "$tmp/old2.img"
gw_args mode=wb
start_gw
put_x F E
stop_nbdkit "$tmp/pid"
cp "$tmp/cache.img" "$tmp/now.img"
cp "$tmp/old2.img" "$tmp/cache.img"
gw_args
refused_unchanged 'holds a run \(epoch [0-9]*\) later than any this cache knows of'
gw_args mode=wb
refused_unchanged 'later than any this cache knows of'
check_says 1 'holds a run \(epoch [0-9]*\) later than any this cache knows of'
cp "$tmp/now.img" "$tmp/cache.img"
check_says 0 'later than any this cache knows of'
start_gw
put_x G F
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
