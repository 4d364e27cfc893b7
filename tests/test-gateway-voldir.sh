#!/usr/bin/env bash
# hhc-gateway's volumes_dir and hhcctl volume add/remove/list: volumes
# added and removed while the gateway runs, kept across its restart.
#
#   - the gateway makes the missing directory and writes its PID file;
#   - add a (mode hhc, with a log) from a file and b from stdin: both
#     served; data written to a through the front reads back;
#   - add a again: exit 0, nothing changed; a volume that shares a's
#     cache, or a with other settings: exit 1, one line, nothing changed;
#   - two conflicting adds at once: one wins, the other is refused;
#   - an invalid file dropped in by hand, then SIGHUP: nothing changes,
#     the error is logged;
#   - restart: a and b come back, a's data is there;
#   - remove --drain a: the backend file holds the data (read directly);
#     remove again: exit 0; a main-file volume: exit 1;
#   - gateway stopped: add exits 1 and leaves the file, remove exits 0;
#   - bad input: one-line errors, usage errors exit 2.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
[ -x "$gateway" ] && [ -x "$hhcctl" ] || fail "hhc-gateway or hhcctl not built"
truncate -s 16M "$tmp"/{a,b,c,d,e,m}.img
mkdir "$tmp/in"
dir=$tmp/vol.d

cat >"$tmp/gateway.json" <<EOF
{
  "listen": {"socket": "$tmp/front.sock"},
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$tmp/run", "metrics": false,
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes_dir": "$dir",
  "volumes": [
    {"name": "m", "backend": {"type": "file", "path": "$tmp/m.img"},
     "cache": "$tmp/m.cache", "cache_size": "4M", "backend_id": "m"}
  ]
}
EOF
# vol NAME [EXTRA-KEYS]: a file-backed volume with its own cache.
vol ()
{
  printf '{"name": "%s", "backend": {"type": "file", "path": "%s/%s.img"},
 "cache": "%s", "cache_size": "4M", "backend_id": "%s"%s}\n' \
    "$1" "$tmp" "$1" "${CACHE:-$tmp/$1.cache}" "$1" "${2:+, $2}"
}
vol a "\"log\": \"$tmp/a.log\", \"log_size\": \"8M\", \"mode\": \"hhc\"" \
  >"$tmp/in/a.json"
vol b >"$tmp/in/b.json"

ctl ()
{
  "$hhcctl" volume "$1" --config "$tmp/gateway.json" "${@:2}"
}
# expect_error STATUS REGEX CMD...: CMD exits STATUS with one line on
# stderr matching REGEX.
expect_error ()
{
  local want=$1 re=$2 st=0
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq "$want" ] ||
    fail "$*: status $st, expected $want ($(cat "$tmp/err"))"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] ||
    fail "$*: expected one line, got: $(cat "$tmp/err")"
  grep -Eq -- "$re" "$tmp/err" || fail "$*: unexpected: $(cat "$tmp/err")"
}
listed ()
{
  grep -q "^$1 " "$tmp/run/exports" 2>/dev/null
}
up ()
{
  [ -s "$tmp/run/hhc-gateway.pid" ] && listed m
}
served ()
{
  ctl list | grep -Eq "^$1 +file +yes\$"
}
front ()
{
  nbdsh -u "nbd+unix:///$1?socket=$tmp/front.sock" -c "$2"
}

start_gateway "$gateway" "$tmp/gateway.json"
poll_until 60 up || fail "the gateway did not come up: $(cat "$tmp/gateway.log")"
[ "$(cat "$tmp/run/hhc-gateway.pid")" = "$gw_pid" ] ||
  fail "hhc-gateway.pid does not hold the gateway's PID"
[ "$(stat -c %a "$dir")" = 750 ] || fail "$dir not made with mode 0750"

# Add a from a file, b from stdin: served when hhcctl returns.
ctl add --wait 60 "$tmp/in/a.json" || fail "volume add a failed"
ctl add --wait 60 - <"$tmp/in/b.json" || fail "volume add b failed"
listed a && listed b || fail "a or b not in exports: $(cat "$tmp/run/exports")"
cmp -s "$tmp/in/a.json" "$dir/a.json" || fail "$dir/a.json differs from the input"
ctl list >"$tmp/list"
grep -Eq '^a +file +yes$' "$tmp/list" && grep -Eq '^b +file +yes$' "$tmp/list" &&
  ! grep -q '^m ' "$tmp/list" || fail "volume list: $(cat "$tmp/list")"
ctl list --json | grep -q '"served": true' || fail "volume list --json"
ls -A "$dir" | grep -v '^\.lock$' | grep -q '^\.' &&
  fail "a temporary file was left in $dir"

# Data through the front; it reads back.
head -c 1048576 /dev/urandom >"$tmp/data"
front a "buf = open('$tmp/data', 'rb').read()
h.pwrite(buf, 65536)
h.flush()
assert h.pread(len(buf), 65536) == buf"

# The same volume again: nothing changed.  Conflicts: exit 1, nothing
# changed.
before=$(stat -c '%i %Y' "$dir/a.json")
expect_error 0 'volume a is there already, unchanged' \
  ctl add "$tmp/in/a.json"
[ "$(stat -c '%i %Y' "$dir/a.json")" = "$before" ] || fail "a.json rewritten"
CACHE=$tmp/a.cache vol c >"$tmp/in/c.json"
expect_error 1 "^hhcctl volume add: $tmp/in/c.json:[0-9]+:[0-9]+: cache: .* is also the cache of volume \"a\"$" \
  ctl add "$tmp/in/c.json"
[ ! -e "$dir/c.json" ] || fail "c.json written"
CACHE=$tmp/other.cache vol a >"$tmp/in/a2.json"
expect_error 1 '^hhcctl volume add: volume a exists with other settings$' \
  ctl add "$tmp/in/a2.json"
cmp -s "$tmp/in/a.json" "$dir/a.json" || fail "a.json changed"
vol m >"$tmp/in/m.json"
expect_error 1 "volume m is defined in $tmp/gateway.json" \
  ctl add "$tmp/in/m.json"

# Two adds at once that want the same cache: they take turns, one
# wins, the other is refused (the directory stays valid).
CACHE=$tmp/cd.cache vol c >"$tmp/in/c1.json"
CACHE=$tmp/cd.cache vol d >"$tmp/in/d1.json"
ctl add "$tmp/in/c1.json" 2>"$tmp/c1.err" &
p1=$!
ctl add "$tmp/in/d1.json" 2>"$tmp/d1.err" &
p2=$!
s1=0 s2=0
wait "$p1" || s1=$?
wait "$p2" || s2=$?
[ $((s1 + s2)) -eq 1 ] ||
  fail "concurrent adds: status $s1 and $s2: $(cat "$tmp/c1.err" "$tmp/d1.err")"
grep -q 'is also the cache of volume' "$tmp/c1.err" "$tmp/d1.err" ||
  fail "concurrent adds: no conflict reported"
ctl remove c 2>/dev/null && ctl remove d 2>/dev/null ||
  fail "removing c and d failed"

# An invalid file by hand, then SIGHUP: kept running, error logged.
vol d '"mode": "fast"' >"$dir/d.json"
kill -HUP "$gw_pid"
poll_until 60 grep -q "reload: $dir/d.json:[0-9]*:[0-9]*: mode: .*(the running configuration is kept)" \
  "$tmp/gateway.log" || fail "no reload error logged: $(cat "$tmp/gateway.log")"
listed a && listed b || fail "a volume stopped after an invalid reload"
front a "assert h.pread(1048576, 65536) == open('$tmp/data', 'rb').read()"
# A file whose name is not its volume's.
vol e >"$dir/f.json"
expect_error 1 "$dir/d.json" ctl list
rm "$dir/d.json"
expect_error 1 "^hhcctl volume list: $dir/f.json:[0-9]+:[0-9]+: name: must be \"f\"" \
  ctl list
rm "$dir/f.json"

# Restart: the directory's volumes come back with their data.
_hhc_stop_gateway
[ ! -e "$tmp/run/hhc-gateway.pid" ] || fail "hhc-gateway.pid left at exit"
start_gateway "$gateway" "$tmp/gateway.json"
poll_until 60 up || fail "the gateway did not come back"
poll_until 60 served a || fail "a not served after the restart: $(ctl list)"
poll_until 60 served b || fail "b not served after the restart: $(ctl list)"
front a "assert h.pread(1048576, 65536) == open('$tmp/data', 'rb').read()"

# remove --drain: the backend file holds the data; the volume is gone.
ctl remove --drain --wait 60 a || fail "volume remove --drain a failed"
[ ! -e "$dir/a.json" ] || fail "a.json still there"
listed a && fail "a still in exports"
[ ! -S "$tmp/run/a.ctl" ] || fail "a's control socket is still there"
cmp -n 1048576 -i 65536:0 "$tmp/a.img" "$tmp/data" ||
  fail "a.img does not hold the data written"
expect_error 0 'no volume a in .*, nothing to do' ctl remove a
expect_error 1 "volume m is defined in $tmp/gateway.json, not in $dir" \
  ctl remove m
listed b || fail "b stopped"
ctl remove b || fail "volume remove b failed"
listed b && fail "b still in exports"

# With the gateway stopped: add fails and leaves the file (for the next
# start), remove succeeds.
_hhc_stop_gateway
expect_error 1 'hhc-gateway.pid: No such file .*is hhc-gateway running' \
  ctl add "$tmp/in/b.json"
[ -e "$dir/b.json" ] || fail "b.json not left for the next start"
expect_error 0 "volume b removed from $dir\$" ctl remove b
[ ! -e "$dir/b.json" ] || fail "b.json not removed"

# Bad input.
expect_error 2 'add, remove or list is required' "$hhcctl" volume
expect_error 2 "unknown subcommand 'frob'" "$hhcctl" volume frob
expect_error 2 'one FILE' ctl add
expect_error 2 'not a volume name' ctl remove ../x
expect_error 2 'wait' ctl add --wait x "$tmp/in/a.json"
expect_error 2 '--drain is not an option of add' ctl add --drain "$tmp/in/a.json"
expect_error 1 "$tmp/nope.json: No such file" ctl add "$tmp/nope.json"
printf '{"name": "x",\n "backend": }\n' >"$tmp/in/x.json"
expect_error 1 "^hhcctl volume add: $tmp/in/x.json:2:" ctl add "$tmp/in/x.json"
expect_error 1 "^hhcctl volume add: <stdin>:1:1: .*name" ctl add - <<<'{}'
[ -z "$(ls "$dir")" ] || fail "$dir is not empty: $(ls -A "$dir")"
echo "$_hhc_name: ok"
