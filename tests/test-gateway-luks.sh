#!/usr/bin/env bash
# hhc-gateway with a volume's "encryption": {"passphrase_file": FILE}:
# the volume's nbdkit stacks the luks filter above hhc and reads the
# passphrase from the file (only its path is on the command line).
#
# A LUKSv1 backend (cryptsetup) serves its payload through the gateway;
# 1 MiB of a 16-byte marker written, flushed and drained is in none of
# the cache, the log and the backend; the passphrase is in no command
# line and not in the gateway's output.  Bad "encryption" configs (a
# missing, world-readable, empty or relative passphrase file, a
# directory, wrong keys, the luks filter not installed) are refused by
# --check and by a start with one line naming the volume and the key,
# and change nothing.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh cryptsetup numfmt python3 grep ps md5sum
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
[ -x "$gateway" ] && [ -x "$hhcctl" ] || fail "hhc-gateway, hhcctl: not built"

if ! nbdkit --filter=luks null --dump-plugin >/dev/null 2>&1; then
  [ -z "${CI:-}" ] || fail "nbdkit's luks filter is missing (CI is set)"
  echo "$0: SKIP: nbdkit's luks filter is missing (nbdkit >= 1.32)" >&2
  exit 77
fi

marker=HHC-GW-LUKS-MARK
pass=$tmp/enc.pass
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '\n' >"$pass")
luks_create "$pass" "$tmp/enc.img" 32M
files=("$tmp/enc.cache" "$tmp/enc.log" "$tmp/enc.img")

# config FILE RUN-DIR [ENCRYPTION-JSON [EXTRA-GLOBALS]]
config ()
{
  local enc=${3-"{\"passphrase_file\": \"$pass\"}"}
  cat >"$1" <<EOF
{ "listen": {"socket": "$tmp/nbd.sock"}, "metrics": false,
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$2"${4:+, $4},
  "volumes": [
    { "name": "enc", "backend": {"type": "file", "path": "$tmp/enc.img"},
      "cache": "$tmp/enc.cache", "cache_size": "16M",
      "log": "$tmp/enc.log", "log_size": "16M", "mode": "hhc",
      "backend_id": "enc", "tuning": {"idle-ms": 0},
      "encryption": $enc } ] }
EOF
}

uri="nbd+unix:///enc?socket=$tmp/nbd.sock"
serving ()
{
  nbdinfo --size "$uri" >"$tmp/size" 2>/dev/null
}

config "$tmp/gw.json" "$tmp/run"
"$gateway" -c "$tmp/gw.json" --check | grep -q ': ok, 1 volume' ||
  fail "--check did not accept the encrypted volume"
start_gateway "$gateway" "$tmp/gw.json"
poll_until 60 serving || fail "volume enc is not served"
# The export is the LUKS payload: luks is stacked.
[ "$(cat "$tmp/size")" -eq $((32 << 20)) ] ||
  fail "the export is $(cat "$tmp/size") bytes, not the 32 MiB payload"

nbdsh -u "$uri" -c "
m = b'$marker' * 65536
h.pwrite(m, 5 << 20)
h.flush()
assert h.pread(len(m), 5 << 20) == m, 'the marker does not read back'"

ps -eo args >"$tmp/ps"
grep -q -F -- "--filter=luks --filter=$hhc" "$tmp/ps" ||
  fail "the volume's nbdkit does not stack luks above hhc"
grep -q -F -- "passphrase=+$pass" "$tmp/ps" ||
  fail "the volume's nbdkit is not given passphrase=+FILE"
if grep -q -F -f "$pass" "$tmp/ps"; then
  fail "the passphrase is on a command line"
fi

"$hhcctl" drain --run-dir "$tmp/run" enc >/dev/null 2>&1 ||
  fail "hhcctl drain enc failed"
_hhc_stop_gateway
for f in "${files[@]}"; do
  n=$(grep -c -a -F -- "$marker" "$f" || true)
  [ "$n" -eq 0 ] || fail "the plaintext marker is in $f ($n times)"
done
if grep -q -F -f "$pass" "$tmp/gateway.log"; then
  fail "the passphrase is in the gateway's output"
fi

# refused NAME REGEX ENCRYPTION-JSON [EXTRA-GLOBALS]: --check and a
# start fail with one line naming volume enc's key, and change nothing.
md5sum "${files[@]}" >"$tmp/before.md5"
refused ()
{
  local name=$1 re=$2 f=$tmp/$1.json st mode
  config "$f" "$tmp/run-$name" "$3" "${4-}"
  for mode in --check ""; do
    st=0
    timeout 30 "$gateway" -c "$f" $mode >"$tmp/out" 2>"$tmp/err" || st=$?
    [ "$st" -eq 1 ] ||
      fail "$name: exit status $st, expected 1 ($(cat "$tmp/err"))"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] ||
      fail "$name: expected one line, got: $(cat "$tmp/err")"
    grep -Eq "^hhc-gateway: $f:[0-9]+:[0-9]+: volumes\[0\]\.encryption$re" \
         "$tmp/err" || fail "$name: unexpected message: $(cat "$tmp/err")"
    [ ! -e "$tmp/run-$name" ] || fail "$name: the run directory was made"
  done
  md5sum --quiet -c "$tmp/before.md5" || fail "$name: a device changed"
}

cp "$pass" "$tmp/open.pass"
chmod 644 "$tmp/open.pass"
: >"$tmp/empty.pass"
chmod 600 "$tmp/empty.pass"
# An nbdkit whose filter directory has no luks filter.
mkdir "$tmp/nofilters"
cat >"$tmp/nbdkit-noluks" <<EOF
#!/bin/sh
[ "\$1" = --dump-config ] || exec nbdkit "\$@"
nbdkit --dump-config | sed 's|^filterdir=.*|filterdir=$tmp/nofilters|'
EOF
chmod +x "$tmp/nbdkit-noluks"

pf='\.passphrase_file: volume "enc": '
refused missing "$pf\"$tmp/none.pass\": No such file or directory" \
  "{\"passphrase_file\": \"$tmp/none.pass\"}"
refused world-readable "$pf\"$tmp/open.pass\" is open to every user \(mode 0644\): chmod o-rwx it" \
  "{\"passphrase_file\": \"$tmp/open.pass\"}"
refused empty "$pf\"$tmp/empty.pass\" is empty" \
  "{\"passphrase_file\": \"$tmp/empty.pass\"}"
refused directory "$pf\"$tmp/nofilters\": not a regular file" \
  "{\"passphrase_file\": \"$tmp/nofilters\"}"
refused relative "${pf}must be an absolute path" \
  '{"passphrase_file": "enc.pass"}'
refused not-object ': must be an object' "\"$pass\""
refused unknown-key '\.passphrase: unknown key' "{\"passphrase\": \"x\"}"
refused no-file '\.passphrase_file: required key missing' '{}'
refused no-luks ": volume \"enc\": nbdkit's luks filter is not installed \(no $tmp/nofilters/nbdkit-luks-filter.so; .*\)" \
  "{\"passphrase_file\": \"$pass\"}" "\"nbdkit\": \"$tmp/nbdkit-noluks\""
if [ "$(id -u)" -ne 0 ]; then
  cp "$pass" "$tmp/locked.pass"
  chmod 000 "$tmp/locked.pass"
  refused unreadable "$pf\"$tmp/locked.pass\": Permission denied" \
    "{\"passphrase_file\": \"$tmp/locked.pass\"}"
fi
echo "$_hhc_name: ok"
