#!/usr/bin/env bash
# Mode hhc: concurrent FLUSHes share log syncs (group commit).
#
# 16 fio jobs (separate processes, one NBD connection each) each do
# 50 random 4 KiB writes in their own MiB, each write followed by a
# FLUSH.  After a clean stop the stats file must count at least the
# flushes fio sent, and fewer than half as many log syncs as flushes.
# This is a ratio, not a time: it holds on a slow machine too.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo fio python3
hhc=$(filter)
make_tmpdir

jobs=16
ios=50

truncate -s 64M "$tmp/backend.img"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" --filter="$hhc" \
             file "$tmp/backend.img" cache="$tmp/cache.img" cache-size=32M \
             log="$tmp/log" log-size=16M backend-id=groupcommit-test \
             stats="$tmp/stats.json"

# fio says "connected to NBD server" on stdout: results go to a file.
timeout 120 fio --name=gc --ioengine=nbd --uri="$(nbd_uri "$tmp/sock")" \
    --rw=randwrite --bs=4k --size=1M --offset_increment=1M \
    --number_ios=$ios --fsync=1 --iodepth=1 --numjobs=$jobs \
    --group_reporting --output-format=json --output="$tmp/fio.json" \
    >"$tmp/fio.out" 2>&1 || {
  cat "$tmp/fio.out" "$tmp/fio.json" >&2 || true
  fail "fio failed"
}
stop_nbdkit "$tmp/pid"

python3 - "$tmp/stats.json" "$tmp/fio.json" "$jobs" "$ios" <<'EOF' ||
import json, sys
s = json.load(open(sys.argv[1]))
f = json.load(open(sys.argv[2]))
jobs, ios = int(sys.argv[3]), int(sys.argv[4])
job = f["jobs"][0]
writes = job["write"]["total_ios"]
if job["error"] or writes != jobs * ios:
    sys.exit("fio: error %d, %d writes (want %d)" % (job["error"], writes, jobs * ios))
flushes, lg = s["flushes"], s["log"]
# A barrier is made durable by a sync or by FUA writes alone.
durable = lg["syncs"] + lg["fua_barriers"]
print("%d clients x %d writes+flushes: flushes %d, log syncs %d,"
      " FUA barriers %d, barriers %d (durable points/flushes %.3f)"
      % (jobs, ios, flushes, lg["syncs"], lg["fua_barriers"], lg["barriers"],
         durable / max(flushes, 1)))
# fio sends no FLUSH after a job's last write.
if flushes < jobs * (ios - 1):
    sys.exit("only %d flushes counted, fio sent at least %d"
             % (flushes, jobs * (ios - 1)))
if not durable * 2 < flushes:
    sys.exit("no group commit: %d log syncs and FUA barriers for %d flushes"
             % (durable, flushes))
EOF
  fail "group commit"
