#!/usr/bin/env bash
# tests/rgw.sh: a one-node Ceph cluster with radosgw, for the cos
# plugin's tests and benchmark against a real object store.
#
#   tests/rgw.sh start DIR      bring it up under DIR (which must not
#                               exist); print four lines on stdout,
#                               ENDPOINT=, REGION=, ACCESS_KEY=,
#                               SECRET_KEY=, and nothing else
#   tests/rgw.sh stop DIR       stop every daemon it started (by the PIDs
#                               in DIR/run) and remove DIR
#   tests/rgw.sh stop-rgw DIR   stop radosgw only (an outage)
#   tests/rgw.sh start-rgw DIR  start radosgw again, same port; returns
#                               once it answers
#
# Debian's Ceph (ceph-mon, ceph-mgr, ceph-osd, radosgw, ceph-common;
# scripts/install-deps): one monitor, one manager, one OSD, radosgw
# (beast) on 127.0.0.1 with a port of its own.  Everything binds
# 127.0.0.1; pools have size 1, min_size 1.
#
# The OSD is BlueStore on a file, DIR/osd/block: a 16 GiB sparse file
# (disk is used only as data is written; the benchmark writes a few
# GiB).  BlueStore on a file works here (its aio on a regular file), so
# memstore, which would hold every object in the OSD's memory, is not
# needed.  Memory is kept small: osd_memory_target 896 MiB, a fixed
# 128 MiB BlueStore cache, one op shard; the four daemons use about
# 450 MiB together when idle (ceph-mgr most of it).  Start takes about
# 16 s, stop about 4 s (2 cores).  Daemons run in the foreground of a
# background job (so their PIDs are ours, in DIR/run/*.pid); their
# logs are in DIR/log.  The S3 keys come from radosgw-admin's JSON
# through a pipe: they appear on no command line.
set -Eeuo pipefail

die ()
{
  echo "rgw.sh: $*" >&2
  false
}

usage ()
{
  echo "usage: tests/rgw.sh start|stop|start-rgw|stop-rgw DIR" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Run a ceph client command against this cluster, quietly.
cephc ()
{
  timeout 60 ceph -c "$dir/ceph.conf" "$@" 2>>"$dir/log/client.log"
}

# poll_until SECS CMD...: run CMD every 0.2 s until it succeeds.
poll_until ()
{
  local end=$(( SECONDS + $1 ))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}

port_free ()
{
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A free port below Linux's ephemeral range.
pick_port ()
{
  local p n
  for (( n = 0; n < 100; n++ )); do
    p=$(( 20000 + RANDOM % 12000 ))
    port_free "$p" && { echo "$p"; return 0; }
  done
  die "no free port found"
}

# run NAME CMD...: CMD in the background, its PID in DIR/run/NAME.pid.
run ()
{
  local name=$1
  shift
  "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.pid"
}

alive ()
{
  local pid
  pid=$(cat "$dir/run/$1.pid" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null
}

# stop_daemon NAME: SIGTERM, then SIGKILL after 20 s.
stop_daemon ()
{
  local f=$dir/run/$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || :
    if ! poll_until 20 eval "! kill -0 $pid 2>/dev/null"; then
      echo "rgw.sh: $1 ($pid) did not stop: SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || :
      poll_until 10 eval "! kill -0 $pid 2>/dev/null" || :
    fi
  fi
  rm -f "$f"
}

write_conf ()
{
  local mon_port=$1 rgw_port=$2 fsid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind ipv6 = false
ms bind port min = $(( mon_port + 1 ))
ms bind port max = $(( mon_port + 40 ))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
crash dir = $dir/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon max pg per osd = 500
[client.admin]
keyring = $dir/keyring
[mon]
mon data = $dir/mon
keyring = $dir/mon.keyring
[mgr]
mgr data = $dir/mgr
mgr initial modules =
[osd]
osd data = $dir/osd
keyring = $dir/osd/keyring
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 17179869184
bluestore fsck on mkfs = false
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 939524096
osd memory cache min = 67108864
osd op num shards = 1
osd op num threads per shard = 2
[client.rgw.a]
keyring = $dir/rgw/keyring
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw thread pool size = 64
rgw enable usage log = false
rgw dns name = 127.0.0.1
EOF
}

start_mon ()
{
  local mk=(ceph-authtool --create-keyring)
  "${mk[@]}" "$dir/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' \
    --cap mds 'allow *' >/dev/null
  "${mk[@]}" "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' \
    >/dev/null
  ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/keyring" >/dev/null
  monmaptool --create --fsid "$(sed -n 's/^fsid = //p' "$dir/ceph.conf")" \
    --addv a "[v2:127.0.0.1:$1]" "$dir/monmap" >/dev/null
  ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
    --keyring "$dir/mon.keyring" >>"$dir/log/mkfs.out" 2>&1 ||
    die "ceph-mon --mkfs failed (see $dir/log)"
  run mon ceph-mon -f -c "$dir/ceph.conf" -i a
  poll_until 60 cephc mon stat || die "the monitor did not start (see $dir/log)"
}

start_mgr ()
{
  mkdir -p "$dir/mgr"
  cephc auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' \
    mds 'allow *' -o "$dir/mgr/keyring"
  run mgr ceph-mgr -f -c "$dir/ceph.conf" -i x --keyring "$dir/mgr/keyring"
}

osd_up ()
{
  [ "$(cephc osd stat -f json | python3 -c \
    'import json, sys; print(json.load(sys.stdin)["num_up_osds"])')" = 1 ]
}

start_osd ()
{
  local uuid id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$(cephc osd new "$uuid") || die "ceph osd new failed"
  [ "$id" = 0 ] || die "ceph osd new gave id $id"
  mkdir -p "$dir/osd"
  ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --mkkey --no-mon-config \
    --osd-uuid "$uuid" \
    >>"$dir/log/mkfs.out" 2>&1 || die "ceph-osd --mkfs failed (see $dir/log)"
  cephc auth add osd.0 osd 'allow *' mon 'allow profile osd' \
    mgr 'allow profile osd' -i "$dir/osd/keyring"
  run osd ceph-osd -f -c "$dir/ceph.conf" -i 0
  poll_until 90 osd_up || die "the OSD did not come up (see $dir/log)"
}

rgw_answers ()
{
  local port
  port=$(cat "$dir/rgw/port")
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/"
}

start_rgw ()
{
  run rgw radosgw -f -c "$dir/ceph.conf" -n client.rgw.a
  poll_until 120 rgw_answers || die "radosgw did not answer (see $dir/log)"
}

# Create the S3 user; print the four assignments.  The keys go from
# radosgw-admin's JSON on a pipe to stdout.
make_user ()
{
  timeout 60 radosgw-admin -c "$dir/ceph.conf" -n client.admin user create \
    --uid=hhc --display-name=hhc 2>>"$dir/log/client.log" |
    python3 -c '
import json, sys
k = json.load(sys.stdin)["keys"][0]
print("ENDPOINT=http://127.0.0.1:%s" % sys.argv[1])
print("REGION=default")
print("ACCESS_KEY=%s" % k["access_key"])
print("SECRET_KEY=%s" % k["secret_key"])' "$(cat "$dir/rgw/port")"
}

do_start ()
{
  local mon_port rgw_port
  [ ! -e "$dir" ] || die "$dir exists"
  for c in ceph ceph-mon ceph-mgr ceph-osd radosgw radosgw-admin curl python3; do
    command -v "$c" >/dev/null || die "$c not found (scripts/install-deps)"
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  mkdir -p "$dir/run" "$dir/log" "$dir/crash" "$dir/rgw"
  # On failure: say where, stop what was started, keep DIR's logs.
  trap 'start_failed $LINENO' ERR
  chmod 700 "$dir"
  mon_port=$(pick_port)
  # The daemons bind ports mon_port + 1 .. + 40 (ms bind port min and
  # max, write_conf): radosgw's must be none of them (a CI run failed
  # once with "failed to bind address: Address already in use").
  local n
  for (( n = 0; n < 100; n++ )); do
    rgw_port=$(pick_port)
    (( rgw_port < mon_port || rgw_port > mon_port + 40 )) && break
  done
  (( n < 100 )) || die "no port for radosgw outside the daemons' range"
  echo "$rgw_port" >"$dir/rgw/port"
  write_conf "$mon_port" "$rgw_port"
  start_mon "$mon_port"
  start_mgr
  start_osd
  cephc auth get-or-create client.rgw.a mon 'allow rw' osd 'allow rwx' \
    mgr 'allow rw' -o "$dir/rgw/keyring"
  start_rgw
  make_user
}

start_failed ()
{
  trap - ERR
  echo "rgw.sh: start failed (line $1); logs in $dir/log:" >&2
  tail -n 5 "$dir"/log/*.out "$dir/log/client.log" >&2 2>/dev/null || :
  stop_all
  exit 1
}

# radosgw, the OSD and the manager at once (each waits for the
# others' SIGTERM no longer than for its own), then the monitor.
stop_all ()
{
  local n pid
  for n in rgw osd mgr; do
    pid=$(cat "$dir/run/$n.pid" 2>/dev/null) || continue
    kill "$pid" 2>/dev/null || :
  done
  stop_daemon rgw
  stop_daemon osd
  stop_daemon mgr
  stop_daemon mon
}

do_stop ()
{
  [ -d "$dir/run" ] || die "$dir: not a cluster made by tests/rgw.sh"
  stop_all
  rm -rf "$dir"
}

case $cmd in
  start) do_start ;;
  stop) do_stop ;;
  stop-rgw) stop_daemon rgw ;;
  start-rgw)
    alive rgw && die "radosgw is running"
    start_rgw
    ;;
  *) usage ;;
esac
