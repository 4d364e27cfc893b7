#!/usr/bin/env bash
# hhc-gateway refuses a bad config before it starts anything: each
# error is one line FILE:LINE:COL: ..., the exit status is 1, no run
# directory is made and no nbdkit is started (the unit test
# tests/unit/test-config-errors checks every message; this checks the
# program around it).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
[ -x "$gateway" ] || fail "$gateway: not built"
truncate -s 16M "$tmp/a.img" "$tmp/b.img"
touch "$tmp/a.cache" "$tmp/b.cache" "$tmp/a.log"

# refused NAME REGEX JSON: hhc-gateway (and --check) fail with one line
# matching REGEX, and start nothing.
refused ()
{
  local name=$1 re=$2 f=$tmp/$1.json st mode
  printf '%s\n' "$3" >"$f"
  for mode in --check ""; do
    st=0
    timeout 30 "$gateway" -c "$f" $mode >"$tmp/out" 2>"$tmp/err" || st=$?
    [ "$st" -eq 1 ] ||
      fail "$name: exit status $st, expected 1 ($(cat "$tmp/err"))"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] ||
      fail "$name: expected one line, got: $(cat "$tmp/err")"
    grep -Eq "^hhc-gateway: $f:[0-9]+:[0-9]+: $re" "$tmp/err" ||
      fail "$name: unexpected message: $(cat "$tmp/err")"
    [ ! -e "$tmp/run" ] || fail "$name: the run directory was made"
  done
}

vol ()
{
  printf '{"name": "%s", "backend": {"type": "file", "path": "%s"}, "cache": "%s"%s}' \
    "$1" "$2" "$3" "${4:+, $4}"
}
run="\"run_dir\": \"$tmp/run\""

refused syntax '.*' '{"volumes": [ }'
refused unknown-key 'volumes\[0\]\.cahce' \
  "{$run, \"volumes\": [{\"name\": \"a\", \"backend\": {\"type\": \"file\", \"path\": \"$tmp/a.img\"}, \"cahce\": \"$tmp/a.cache\"}]}"
refused wrong-type 'listen\.port' \
  "{$run, \"listen\": {\"address\": \"127.0.0.1\", \"port\": \"10809\"}, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/a.cache")]}"
refused missing-device 'volumes\[0\]\.cache' \
  "{$run, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/nope.cache")]}"
refused shared-device 'volumes\[1\]\.cache' \
  "{$run, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/a.cache"), $(vol b "$tmp/b.img" "$tmp/a.cache")]}"
refused cache-as-log 'volumes\[1\]\.log' \
  "{$run, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/a.cache" "\"log\": \"$tmp/a.log\""), $(vol b "$tmp/b.img" "$tmp/b.cache" "\"log\": \"$tmp/a.cache\"")]}"
refused duplicate-name 'volumes\[1\]\.name' \
  "{$run, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/a.cache"), $(vol a "$tmp/b.img" "$tmp/b.cache")]}"
refused bad-mode 'volumes\[0\]\.mode' \
  "{$run, \"volumes\": [$(vol a "$tmp/a.img" "$tmp/a.cache" '"mode": "fast"')]}"
refused no-volumes 'volumes' "{$run, \"volumes\": []}"

# A missing file: one line naming it.
st=0
"$gateway" -c "$tmp/none.json" 2>"$tmp/err" || st=$?
[ "$st" -eq 1 ] && grep -q "$tmp/none.json" "$tmp/err" ||
  fail "a missing config file: status $st, $(cat "$tmp/err")"
# Bad options: usage, status 2.
st=0
"$gateway" 2>"$tmp/err" || st=$?
[ "$st" -eq 2 ] && grep -q 'usage' "$tmp/err" ||
  fail "no -c: status $st, $(cat "$tmp/err")"
echo "$_hhc_name: ok"
