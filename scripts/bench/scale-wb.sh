# shellcheck shell=bash
# Sourced by scripts/bench/scale: experiments writeback, replay-big and
# redo (issue 33, items 2 and 3).  See the header of scripts/bench/scale.

# ---- writeback ----

# wb_backend SOCK IMG: the RAID5 profile of scripts/bench/run (delay
# filter, rate=940M, 4 threads), one shared connection above it.
wb_backend ()
{
  start "$1" --threads=4 --filter=rate --filter=delay file "$2" \
    delay-read=8ms delay-write=16ms rate=940M
  wait_serving "$1"
}

# drain_ctl SOCK: the filter's control socket asked to drain; returns
# when it answers "ok" (every block written back, the backend flushed).
drain_ctl ()
{
  /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"drain\n")
buf = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    buf += d
last = buf.decode().strip().splitlines()[-1]
sys.exit(0 if last == "ok" else "drain: " + last)' "$1"
}

# wb_once KIND MB: res, seconds of the drain of MB MiB of dirty blocks
# written as KIND (seq: 1 MiB sequential writes; rand: 4 KiB random
# writes, each block once).
wb_once ()
{
  local d=$work/wb-$1 t0 t1 uri
  mkdir -p "$d"
  truncate -s 4G "$d/backend.img"
  wb_backend "$d/b.sock" "$d/backend.img"
  local bpid=$started
  start "$d/g.sock" --filter="$filter" nbd socket="$d/b.sock" shared=true \
    cache="$d/cache.img" cache-size=$(($2 + $2 / 8 + 16))M mode=wb \
    dirty-low=95 dirty-high=99 dirty-max=100 idle-ms=0 \
    writeback-threads=4 control="$d/ctl" stats="$d/stats.json" \
    backend-id=bench-scale-wb
  local gpid=$started
  wait_serving "$d/g.sock"
  uri="nbd+unix:///?socket=$d/g.sock"
  if [ "$1" = seq ]; then
    fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1M \
      --iodepth=4 --size="$2M" >/dev/null
  else
    fio --name=fill --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k \
      --iodepth=16 --size=4G --io_size="$2M" --randrepeat=0 \
      --norandommap=0 >/dev/null
  fi
  t0=$(now)
  drain_ctl "$d/ctl"
  t1=$(now)
  stop "$gpid"
  stop "$bpid"
  secs "$t0" "$t1"
  rm -rf "$d"
}

# wb_limit KIND MB: res, seconds for fio to write MB MiB straight to a
# backend of the same profile (4 in flight, as writeback-threads=4),
# ending with a flush.
wb_limit ()
{
  local d=$work/wbl
  mkdir -p "$d"
  truncate -s 4G "$d/backend.img"
  wb_backend "$d/b.sock" "$d/backend.img"
  local bpid=$started t0 t1 rw=write bs=1M
  [ "$1" = seq ] || { rw=randwrite; bs=4k; }
  t0=$(now)
  fio --name=limit --ioengine=nbd --uri="nbd+unix:///?socket=$d/b.sock" \
    --rw=$rw --bs=$bs --iodepth=4 --size=4G --io_size="$2M" \
    --randrepeat=0 --end_fsync=1 >/dev/null
  t1=$(now)
  stop "$bpid"
  secs "$t0" "$t1"
  rm -rf "$d"
}

exp_writeback ()
{
  local smb=${HHC_BENCH_WB_MB:-512} rmb=${HHC_BENCH_WB_RAND_MB:-8}
  local ls lr ts tr
  wb_limit seq "$smb"
  ls=$res
  wb_limit rand "$rmb"
  lr=$res
  wb_once seq "$smb"
  ts=$res
  wb_once rand "$rmb"
  tr=$res
  echo "## writeback: a cache full of dirty blocks drained (hhcctl drain)"
  echo "into the RAID5 profile (delay-write=16ms rate=940M --threads=4)"
  echo "| dirty blocks | MiB | drain (s) | MiB/s | backend alone, fio iodepth=4 (s) | MiB/s | / backend |"
  echo "|---|---|---|---|---|---|---|"
  echo "| contiguous (1 MiB writes) | $smb | $ts | $(mibps "$smb" "$ts") |" \
    "$ls (1 MiB writes) | $(mibps "$smb" "$ls") |" \
    "$(echo "100 * $ls / $ts" | bc -l | xargs printf '%.0f')% |"
  echo "| random 4 KiB | $rmb | $tr | $(mibps "$rmb" "$tr") |" \
    "$lr (4 KiB random writes) | $(mibps "$rmb" "$lr") |" \
    "$(echo "100 * $lr / $tr" | bc -l | xargs printf '%.0f')% |"
}

# ---- replay-big, redo ----

# big_fill WAL: $work/big/{backend.img,log.img,cache.img} after a crash
# (SIGKILL) of a gateway in mode hhc (WAL=1: ssd-sync=checkpoint) that
# took $mb MiB of 1 MiB sequential writes and a FLUSH into a 4 GiB log;
# the log's page cache dropped (fadvise DONTNEED: dd iflag=nocache).
big_fill ()
{
  local d=$work/big
  rm -rf "$d"
  mkdir -p "$d"
  truncate -s 8G "$d/backend.img"
  truncate -s 4G "$d/log.img"
  big_gw "$d" "$1"
  fill_seq "$d"
  sync
  dd if="$d/log.img" iflag=nocache count=0 status=none
}

# big_gw DIR WAL: the gateway's arguments (-v: the replay's timing).
big_gw ()
{
  gw=(-v --filter="$filter" file "$1/backend.img" cache="$1/cache.img"
    cache-size=$((mb + 512))M mode=hhc log="$1/log.img" dirty-low=90
    dirty-high=95 idle-ms=0 backend-id=bench-scale-big)
  [ "$2" = 0 ] || gw+=(ssd-sync=checkpoint)
}

# big_restart WAL: the restart timed; total: start to serving (s),
# phase: the replay's (or redo's) own seconds from its message, live:
# the blocks it wrote.
big_restart ()
{
  local d=$work/big t0 t1
  big_gw "$d" "$1"
  t0=$(now)
  start "$d/sock" "${gw[@]}"
  wait_serving "$d/sock"
  t1=$(now)
  stop "$started"
  secs "$t0" "$t1"
  total=$res
  if [ "$1" = 0 ]; then
    phase=$(sed -n 's/.*into the backend and flushed in \([0-9.]*\) s.*/\1/p' \
      "$d/sock.log")
    live=$(sed -n 's/.*log replay: \([0-9]*\) blocks replayed.*/\1/p' \
      "$d/sock.log")
  else
    phase=$(sed -n 's/.*no free slot), in \([0-9.]*\) s.*/\1/p' "$d/sock.log")
    live=$(sed -n 's/.*redid \([0-9]*\) blocks into the cache.*/\1/p' \
      "$d/sock.log")
  fi
  [ -n "$phase" ] && [ -n "$live" ] || {
    echo "$0: no replay/redo message in $d/sock.log" >&2
    exit 1
  }
}

# big_limits: lf, lb: seconds to read $mb MiB of the log with O_DIRECT
# and to write as many to a new file on the backend's (and cache's)
# file system, fdatasync'd.
big_limits ()
{
  local d=$work/big t0 t1
  t0=$(now)
  dd if="$d/log.img" of=/dev/null bs=1M count="$mb" skip=1 iflag=direct \
    status=none
  t1=$(now)
  secs "$t0" "$t1"
  lf=$res
  t0=$(now)
  dd if=/dev/zero of="$d/seqwrite" bs=1M count="$mb" conv=fdatasync \
    status=none
  t1=$(now)
  rm -f "$d/seqwrite"
  secs "$t0" "$t1"
  lb=$res
}

# big_row NAME: a table row from total, phase, live, lf, lb.
big_row ()
{
  local m l=$lf
  m=$(echo "$live * 4096 / 1048576" | bc -l | xargs printf '%.0f')
  [ "$(echo "$lb > $l" | bc)" = 0 ] || l=$lb
  echo "| $1 | $live ($m MiB) | $total | $(mibps "$m" "$total") |" \
    "$(echo "100 * $l * $m / $mb / $total" | bc -l | xargs printf '%.0f')% |" \
    "$phase | $(mibps "$m" "$phase") |"
}

big_head ()
{
  echo "limits ($mb MiB): log read (dd iflag=direct bs=1M): ${lf} s" \
    "($(mibps "$mb" "$lf") MiB/s); sequential write (dd conv=fdatasync" \
    "bs=1M, backend's and cache's file system): ${lb} s" \
    "($(mibps "$mb" "$lb") MiB/s)"
  echo "| restart | live blocks | start to serving (s) | MiB/s | / lesser limit | $2 alone (s) | MiB/s |"
  echo "|---|---|---|---|---|---|---|"
}

exp_replay_big ()
{
  mb=${HHC_BENCH_BIG_MB:-1920}
  big_fill 0
  echo "fincore of the log before the restart: $(fincore -n -o PAGES \
    "$work/big/log.img") pages cached" >&2
  rm -f "$work/big/cache.img"
  big_restart 0
  big_limits
  echo "## replay-big: $mb MiB of 1 MiB writes in a 4 GiB log, SSD lost"
  big_head "$mb" "replay + backend flush"
  big_row "replay (new cache)"
}

exp_redo ()
{
  mb=${HHC_BENCH_BIG_MB:-1920}
  big_fill 1
  big_restart 1
  big_limits
  echo "## redo: $mb MiB of 1 MiB writes in a 4 GiB log, ssd-sync=checkpoint, SIGKILL"
  big_head "$mb" "redo + cache commit"
  big_row "redo (cache kept)"
}
