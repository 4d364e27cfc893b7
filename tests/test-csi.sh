#!/usr/bin/env bash
# hhc-csi end to end, as a container orchestrator drives it: two
# "nodes" on this machine, each an hhc-gateway (its own cache, log,
# volumes directory and NBD socket) with its own hhc-csi; the file
# backend (images in a shared directory) and cos on s3rver.  For each:
#   CreateVolume twice; NodeStage twice and NodePublish on a; files
#   written with fsync; bad input (right codes, nothing changed; b may
#   not stage a volume a holds); Unpublish and Unstage (drained): the
#   backend read directly, without any cache, holds every file; staged
#   on b: files intact; DeleteVolume twice.
# Then kill -9 of node a's gateway (and its nbdkits) while a volume is
# staged: restarted, the volume is served again, unstaged (drained) and
# staged again with its fsync'd files intact.
# Then the same with the volume's file deleted from a's volumes.d: the
# unstage is refused (FAILED_PRECONDITION) and keeps the cache, log and
# claim, b may not stage it; added back, it unstages, drained, and b
# stages it with the files intact.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdfuse losetup mkfs.ext4 mount umount sha256sum
[ "$(id -u)" -eq 0 ] || {
  [ -n "${CI:-}" ] && fail "needs root (mount, losetup), and CI is set"
  echo "$_hhc_name: SKIP: needs root (mount, losetup)" >&2
  exit 77
}
py=/usr/bin/python3
$py -c 'import grpc, grpc_tools' 2>/dev/null || {
  [ -n "${CI:-}" ] && fail "python3-grpcio or python3-grpc-tools missing"
  echo "$_hhc_name: SKIP: python3-grpcio/python3-grpc-tools missing" >&2
  exit 77
}
hhc=$(filter)
make_tmpdir
source "$(dirname "$0")/s3.sh"
csi=$abs_top_builddir/csi/hhc-csi
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
plugins=$abs_top_builddir/.libs
[ -x "$csi" ] || fail "$csi: not built (configure --with-csi)"

start_s3rver csi
mkdir -p "$tmp/images"
export CSI_TMP=$tmp S3_ACCESS_KEY=$s3_access_key S3_SECRET_KEY=$s3_secret_key
export PYTHONPATH=$abs_top_srcdir/tests/csi

declare -A gwpid=() csipid=()

# node_config N: node N's gateway.json and csi.json.
node_config ()
{
  local n=$1 d=$tmp/$1
  mkdir -p "$d/volumes.d" "$d/run" "$d/cache" "$d/log" "$d/state"
  $py - "$n" "$d" >"$d/gateway.json" <<EOF
import json, sys
d = sys.argv[2]
print(json.dumps({
  "listen": {"socket": d + "/nbd.sock"},
  "filter": "$hhc", "plugin_dir": "$plugins", "run_dir": d + "/run",
  "metrics": False, "restart": {"min_ms": 100, "max_ms": 1000},
  "volumes_dir": d + "/volumes.d", "volumes": []}, indent=2))
EOF
  $py - "$n" "$d" >"$d/csi.json" <<EOF
import json, sys
d = sys.argv[2]
print(json.dumps({
  "backends": {
    "files": {"type": "file", "dir": "$tmp/images", "max_size": "1G"},
    "cos": {"type": "cos", "endpoint": "$s3_endpoint", "bucket": "csi",
            "prefix": "k8s", "max_size": "1G"}},
  "node": {
    "gateway_config": d + "/gateway.json", "hhcctl": "$hhcctl",
    "nbd": {"socket": d + "/nbd.sock"},
    "cache_dir": d + "/cache", "cache_size": "32M",
    "log_dirs": [d + "/log"], "log_size": "32M", "mode": "hhc",
    "state_dir": d + "/state", "attach": "nbdfuse", "max_volumes": 4,
    "wait_seconds": 60}}, indent=2))
EOF
}

start_gw ()
{
  local n=$1
  "$gateway" -c "$tmp/$n/gateway.json" </dev/null >>"$tmp/$n/gateway.log" 2>&1 &
  gwpid[$n]=$!
  poll_until 30 test -S "$tmp/$n/nbd.sock" ||
    fail "gateway $n did not start: $(tail -3 "$tmp/$n/gateway.log")"
}

# The PIDs of a process's children (by /proc), each on a line.
children ()
{
  local p
  for p in /proc/[0-9]*; do
    [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"
  done
  return 0
}

stop_gw ()
{
  local n=$1 pid=${gwpid[$1]:-}
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null && { _hhc_wait_gone "$pid" 60 || kill -9 "$pid"; }
  wait "$pid" 2>/dev/null || true
  unset "gwpid[$n]"
}

start_csi ()
{
  local n=$1
  "$csi" --endpoint="unix://$tmp/$n/csi.sock" --nodeid="node-$n" \
    --config="$tmp/$n/csi.json" </dev/null >>"$tmp/$n/csi.log" 2>&1 &
  csipid[$n]=$!
  poll_until 30 test -S "$tmp/$n/csi.sock" || fail "hhc-csi $n did not start"
  export "CSI_${n^^}=unix://$tmp/$n/csi.sock"
}

stop_csi ()
{
  local pid=${csipid[$1]:-}
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null && { _hhc_wait_gone "$pid" 30 || kill -9 "$pid"; }
  wait "$pid" 2>/dev/null || true
}

# Whatever a failed run left mounted or attached under $tmp.  The loop
# devices are listed first: once the nbdfuse mount under them is
# unmounted (lazily), their backing file no longer names $tmp.
sweep ()
{
  local m dev loops
  loops=$(losetup -nO NAME,BACK-FILE 2>/dev/null |
    awk -v t="$tmp" 'index($2, t) == 1 {print $1}')
  for m in $(awk -v t="$tmp" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  for dev in $loops; do losetup -d "$dev" || true; done
}

for n in a b; do
  node_config $n
  cleanup_fn _hhc_print_log_if_failed "$tmp/$n/gateway.log"
  cleanup_fn _hhc_print_log_if_failed "$tmp/$n/csi.log"
  cleanup_fn stop_gw $n
  cleanup_fn stop_csi $n
done
cleanup_fn sweep
"$csi" --check --config="$tmp/a/csi.json" || fail "hhc-csi --check refused the config"
for n in a b; do start_gw $n; start_csi $n; done

e2e ()
{
  $py "$abs_top_srcdir/tests/csi/e2e.py" "$@" || fail "e2e.py $*"
}

source "$abs_top_srcdir/tests/csi/backend-direct.sh"

for backend in files cos; do
  e2e create $backend
  e2e stage $backend
  e2e bad $backend
  CSI_NODE=a e2e unstage $backend
  [ -z "$(ls "$tmp/a/volumes.d")" ] || fail "unstage left a volume on gateway a"
  check_backend_direct $backend
  CSI_NODE=b e2e verify $backend
  CSI_NODE=b e2e unstage $backend
  e2e delete $backend
done
[ -z "$(ls "$tmp/images")" ] || fail "DeleteVolume left $(ls "$tmp/images")"

# kill9_gw_a: kill -9 of node a's gateway and its nbdkits.
kill9_gw_a ()
{
  local pids p
  pids="${gwpid[a]} $(children "${gwpid[a]}")"
  # shellcheck disable=SC2086  # a list of PIDs
  kill -9 $pids
  wait "${gwpid[a]}" 2>/dev/null || true
  for p in $pids; do _hhc_wait_gone "$p" 30 || fail "process $p outlived kill -9"; done
  unset "gwpid[a]"
  rm -f "$tmp/a/nbd.sock"
}

# kill -9 of node a's gateway and its nbdkits while a volume is staged.
e2e create files
e2e stage files
kill9_gw_a
start_gw a
CSI_NODE=a e2e unstage files
check_backend_direct files
CSI_NODE=a e2e verify files
CSI_NODE=a e2e unstage files
e2e delete files

# The format guard of NodeUnstageVolume: staged on a, files written
# with fsync, a's gateway killed -9 and restarted without the volume's
# file (it forgot the volume: its cache and log hold blocks the backend
# lacks).  Unstage fails (FAILED_PRECONDITION), keeping the cache, the
# log and the claim; b may not stage the volume.  The volume added
# back, unstage drains it and drops the claim: b stages it with the
# files intact, and after b's unstage the backend read directly holds
# them.
vol=pvc-0123456789abcdef exp=files.pvc-0123456789abcdef
kept=("$tmp/a/cache/$exp.cache" "$tmp/a/log/$exp.log" "$tmp/images/$vol.claim")
e2e create files
e2e stage files
[ "$(ls "$tmp/a/volumes.d")" = "$exp.json" ] ||
  fail "a/volumes.d holds $(ls "$tmp/a/volumes.d"), not $exp.json"
cp "$tmp/a/volumes.d/$exp.json" "$tmp/$exp.json"
kill9_gw_a
rm "$tmp/a/volumes.d/$exp.json"
start_gw a
e2e unstage-refused files
for f in "${kept[@]}"; do [ -e "$f" ] || fail "a refused unstage removed $f"; done
"$hhcctl" volume add --config "$tmp/a/gateway.json" --wait 60 "$tmp/$exp.json" ||
  fail "hhcctl volume add $exp failed"
CSI_NODE=a e2e unstage files
for f in "${kept[@]}"; do [ ! -e "$f" ] || fail "unstage left $f"; done
[ -z "$(ls "$tmp/a/volumes.d")" ] || fail "unstage left a volume on gateway a"
# The refused unstage got as far as unmounting the lost device, so the
# file system's journal was not replayed on a: b's mount replays it.
CSI_NODE=b e2e verify files
CSI_NODE=b e2e unstage files
check_backend_direct files
e2e delete files
echo "$_hhc_name: ok"
