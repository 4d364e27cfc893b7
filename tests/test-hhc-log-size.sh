#!/usr/bin/env bash
# A log that cannot hold dirty-max of the cache is named at start, with
# both sizes and the parameter to change; a log that can is not.
#
# Each case starts `nbdkit --filter=hhc null 1G cache=... log=...` in
# mode hhc with a 192M cache (dirty-max 95 %: 182M of dirty blocks),
# makes one connection, and checks nbdkit's stderr for the warning.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo
hhc=$(filter)
make_tmpdir

# start_with LOG-SIZE [PARAMS...]: one connection to a fresh gateway;
# its stderr in $tmp/err.
start_with ()
{
  local size=$1
  shift
  rm -f -- "$tmp/cache.img" "$tmp/log.img"
  # shellcheck disable=SC2016 # nbdkit --run expands $uri
  nbdkit -U - --filter="$hhc" null 1G cache="$tmp/cache.img" \
    cache-size=192M log="$tmp/log.img" log-size="$size" mode=hhc \
    backend-id=log-size-test "$@" --run 'nbdinfo --size "$uri"' \
    >"$tmp/out" 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; fail "log-size=$size $*: the gateway failed"; }
}

want="hhc: warning: log-size=64M holds less than dirty-max=95% of"
want+=" cache-size=192M (182M): FLUSHes will wait for write-back to the"
want+=" backend when the dirty blocks fill the log; make log-size at least"
want+=" 189M, or lower dirty-max"

start_with 64M
grep -qF -- "$want" "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "log-size=64M: no warning, or not: $want"; }
[ "$(grep -c 'log-size=' "$tmp/err")" = 1 ] ||
  { cat "$tmp/err" >&2; fail "log-size=64M: warned more than once"; }

# dirty-max=25 of 192M (48M) fits in 64M (with the 7M kept at the
# tail): no warning.
start_with 64M dirty-low=10 dirty-high=20 dirty-max=25
! grep -q 'log-size=' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "dirty-max=25: warned for a log that fits"; }

# The size the warning asks for is enough.
start_with 189M
! grep -q 'log-size=' "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "log-size=189M: warned for a log that fits"; }
