# shellcheck shell=bash
# scripts/bench/scale's experiment mirrors (sourced by it: uses its
# start, wait_serving, stop, fill_seq, now, secs, mibps, $work,
# $filter).

# mirrors_gw DIR FILTER: the gateway's arguments (both mirrors through
# their delayed servers).
mirrors_gw ()
{
  gw=(--filter="$2" file "$1/backend.img" cache="$1/cache.img"
    cache-size=$((mb * 2 + 64))M mode=hhc dirty-low=90 dirty-high=95
    dirty-max=100 idle-ms=0 backend-id=bench-scale-mirrors
    "log=nbd+unix:///?socket=$1/m1.sock" "log=nbd+unix:///?socket=$1/m2.sock")
}

# mirrors_up DIR: the two delayed log servers; $mpids.
mirrors_up ()
{
  mpids=()
  for i in 1 2; do
    start "$1/m$i.sock" --filter=delay file "$1/log$i.img" \
      delay-read="$delay"
    mpids+=("$started")
    wait_serving "$1/m$i.sock"
  done
}

mirrors_down ()
{
  local p
  for p in "${mpids[@]}"; do stop "$p"; done
}

# fill_small DIR: the gateway "${gw[@]}" on DIR/sock takes $mb MiB of
# 4 KiB sequential writes, each followed by a FLUSH (a barrier segment
# of one block each), then is killed with SIGKILL.
fill_small ()
{
  start "$1/sock" "${gw[@]}"
  local pid=$started
  wait_serving "$1/sock"
  fio --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$1/sock" \
    --rw=write --bs=4k --iodepth=1 --fsync=1 --size="${mb}M" >/dev/null
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
}

# mirrors_setup FILL: $work/m/*.orig, a gateway killed with mb MiB live
# in its log (FILL: fill_seq or fill_small; nothing written back).
mirrors_setup ()
{
  local d=$work/m f
  mkdir -p "$d"
  truncate -s 4G "$d/backend.img"
  for i in 1 2; do
    dd if=/dev/zero of="$d/log$i.img" bs=1M count=$((mb * 2 + 64)) \
      conv=fsync status=none
  done
  mirrors_up "$d"
  mirrors_gw "$d" "$filter"
  "$1" "$d"
  mirrors_down
  for f in backend cache log1 log2; do
    cp --sparse=always "$d/$f.img" "$d/$f.orig"
  done
}

# mirrors_once FILTER: res, seconds from start to serving after the
# kill (the cache kept; both mirrors scanned at open).
mirrors_once ()
{
  local d=$work/m f t0 t1
  for f in backend cache log1 log2; do
    cp --sparse=always "$d/$f.orig" "$d/$f.img"
  done
  mirrors_up "$d"
  mirrors_gw "$d" "$1"
  t0=$(now)
  start "$d/sock" "${gw[@]}"
  wait_serving "$d/sock"
  t1=$(now)
  stop "$started"
  mirrors_down
  secs "$t0" "$t1"
}

# One mirror's first LIVE MiB read sequentially in 1 MiB requests
# through its delayed server: res, seconds (a start reads each mirror
# once, all at once).
mirrors_limit ()
{
  local d=$work/m t0 t1
  mirrors_up "$d"
  t0=$(now)
  nbdsh -u "nbd+unix:///?socket=$d/m1.sock" -c "
for i in range($1):
    h.pread(1 << 20, (1 << 20) + (i << 20))"
  t1=$(now)
  mirrors_down
  secs "$t0" "$t1"
}

# exp_mirrors [small]: large segments (1 MiB writes), or barrier
# segments of one block each (4 KiB writes, a FLUSH after each: the
# log holds twice the bytes, with the headers).
exp_mirrors ()
{
  local kind=${1:-seq} fill=fill_seq live
  mb=${HHC_BENCH_MIRRORS_MB:-256}
  live=$mb
  if [ "$kind" = small ]; then
    mb=${HHC_BENCH_MIRRORS_SMALL_MB:-16}
    live=$((mb * 2))
    fill=fill_small
  fi
  delay=${HHC_BENCH_READ_DELAY:-4ms}
  local runs=${HHC_BENCH_MIRRORS_RUNS:-3} lim b r
  local -a builds=("new:$filter")
  [ -z "${HHC_FILTER_BASE:-}" ] || builds+=("base:$HHC_FILTER_BASE")
  declare -A times
  rm -rf "$work/m"
  mirrors_setup "$fill"
  mirrors_limit "$live"
  lim=$res
  for r in $(seq "$runs"); do
    for b in "${builds[@]}"; do
      mirrors_once "${b#*:}"
      times[${b%%:*}]+=" $res"
    done
  done
  echo "## mirrors ($kind): restart after kill -9, $mb MiB of blocks live" \
    "($live MiB of log) in a log of two mirrors"
  echo "limit: one mirror's $live MiB read in 1 MiB requests," \
    "delay-read=$delay: ${lim} s ($(mibps "$live" "$lim") MiB/s)"
  echo "| build | restart to serving, median (min-max) s | / limit |"
  echo "|---|---|---|"
  for b in "${builds[@]}"; do
    python3 - "${b%%:*}" "$lim" ${times[${b%%:*}]} <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[3:]]
m = statistics.median(v)
print(f"| {sys.argv[1]} | {m:.2f} ({min(v):.2f}-{max(v):.2f}) | {m / float(sys.argv[2]):.2f}x |")
PY
  done
}
