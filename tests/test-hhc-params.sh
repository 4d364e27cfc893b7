#!/usr/bin/env bash
# Each bad parameter is refused with one error line naming it, and the
# refusal creates no file.
#
# Every case runs `nbdkit --filter=hhc null 16M ... --run 'nbdinfo'` in
# an empty directory (also the cache's directory and nbdkit's working
# directory) and expects nbdkit to fail with a stderr line matching
# "hhc:" and the parameter's name, leaving the directory empty.  A good
# configuration is tried first so the failures are not an accident of
# the set-up.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo
hhc=$(filter)
make_tmpdir

w=$tmp/work
mkdir "$w"
cache=$w/cache.img

# gateway PARAMS...: one connection to a gateway on the null plugin.
gateway ()
{
  # shellcheck disable=SC2016 # nbdkit --run expands $uri
  (cd "$w" && nbdkit -U - --filter="$hhc" null 16M "$@" \
                     --run 'nbdinfo --size "$uri"')
}

# must_be_empty WHAT: the work directory is still empty.
must_be_empty ()
{
  local left
  left=$(ls -A "$w")
  [ -z "$left" ] || fail "$1 left files behind: $left"
}

# bad PARAM-REGEX PARAMS...
bad ()
{
  local regex=$1
  shift
  expect_fail_with "hhc:.*$regex" gateway "$@"
  must_be_empty "$*"
}

# (The null plugin has no export description: backend-id= names it.)
gateway cache="$cache" cache-size=16M backend-id=params-test >/dev/null ||
  fail "a good configuration was refused"
rm -f -- "$cache"
must_be_empty "removing the cache"

bad 'mode'              cache="$cache" cache-size=16M mode=bogus
bad 'block-size'        cache="$cache" cache-size=16M block-size=1000
bad 'block-size'        cache="$cache" cache-size=16M block-size=2M
bad 'dirty-(low|high)'  cache="$cache" cache-size=16M dirty-low=70 dirty-high=60
bad 'dirty-max'         cache="$cache" cache-size=16M dirty-max=101
bad 'hot-ratio'         cache="$cache" cache-size=16M hot-ratio=0
bad 'format'            cache="$cache" cache-size=16M format=maybe
bad 'ssd-sync'          cache="$cache" cache-size=16M ssd-sync=never
bad 'log-lost'          cache="$cache" cache-size=16M log-lost=maybe
bad 'idle-ms'           cache="$cache" cache-size=16M idle-ms=soon
bad 'seq-cutoff'        cache="$cache" cache-size=16M seq-cutoff=fast
bad 'direct'            cache="$cache" cache-size=16M direct=maybe
bad 'require-backend-id=notabool' cache="$cache" cache-size=16M \
    require-backend-id=notabool
bad 'cache'             cache-size=16M mode=wb
bad 'cache-size'        cache="$cache" cache-size=banana
bad '(cache|no-such-dir)' cache="$w/no-such-dir/cache.img" cache-size=16M
bad 'writeback-threads' cache="$cache" cache-size=16M writeback-threads=0
