# Cache-policy experiments of scripts/bench/run (issue 34), sourced by it:
# scan, burst and hitmodel.  They use run's start, setup, prealloc, mib,
# profile_args, hdd_start, fio_nbd and step; scripts/bench/policies.py
# does the small measurements.  Side files in $work: scan.tsv, burst.tsv
# (+ burst-POLICY-RUN.bw.log timelines), hitmodel.tsv.
# shellcheck shell=bash disable=SC2154

pol_py () { python3 "$root/scripts/bench/policies.py" "$@"; }

# pol_setup NAME PROFILE CACHE BACKEND-MIB FILTER-ARGS...: a backend of
# PROFILE with nbdkit's log filter on top (every request it gets, for the
# bytes read), our filter with a control socket (stats on demand) above
# it; the URI goes to $work/NAME/uri.
pol_setup ()
{
  local name=$1 prof=$2 cache=$3 bmib=$4 d=$work/$1
  shift 4
  rm -rf "$d"
  mkdir -p "$d"
  truncate -s "${bmib}M" "$d/backend.img"
  # shellcheck disable=SC2046
  start "$d/b.sock" --filter=log $(profile_args "$prof" "$d/backend.img") logfile="$d/backend.log"
  prealloc "$d/cache.img" "$(mib "$cache")"
  start "$d/g.sock" --filter="$filter" nbd socket="$d/b.sock" shared=true \
    cache="$d/cache.img" backend-id="bench-$name" stats="$d/stats.json" \
    control="$d/ctl.sock" "$@"
  echo "nbd+unix:///?socket=$d/g.sock" >"$d/uri"
}

# scan_policy_args POLICY: the filter's parameters of a scan policy.
scan_policy_args ()
{
  case $1 in
    always) echo "mode=wb" ;;
    nhit) echo "mode=wb promote=nhit promote-hits=2" ;;
    cutoff) echo "mode=wb seq-cutoff=1M" ;;
    nhit-cutoff) echo "mode=wb promote=nhit promote-hits=2 seq-cutoff=1M" ;;
  esac
}

# scan_probe NAME HOT-MIB N: N distinct random 4 KiB reads of the hot set
# (randommap: each block once), the hit ratio from the filter's counters
# before and after (exact: a 4 KiB read is one block).
scan_probe ()
{
  local d=$work/$1 h0 h1
  h0=$(pol_py hits "$d/ctl.sock")
  nice -n 5 fio --name=probe --ioengine=nbd --uri="$(cat "$d/uri")" --rw=randread \
    --bs=4k --iodepth=8 --size="$2M" --number_ios="$3" --randrepeat=0 \
    --output-format=json --output="$d/probe.json" >/dev/null
  h1=$(pol_py hits "$d/ctl.sock")
  pol_py ratio "$h0" "$h1"
}

# scan_case POLICY RUN C: one case of exp_scan, a row of scan.tsv.
scan_case ()
{
  local p=$1 r=$2 c=$3 hot=$(($3 * 7 / 8)) name=scan-$1-$2 d b0 b1 b2 s0 s1 before during after \
    iops mbps n=1024
  d=$work/$name
  [ "$quick" = no ] || n=512
  # shellcheck disable=SC2046
  pol_setup "$name" raid5 "${c}M" $((c * 6 > 1024 ? c * 6 : 1024)) $(scan_policy_args "$p")
  # Warm: two passes of random 64 KiB reads over the hot set (the second
  # promotes under nhit; random, so the cutoff never sees a stream).
  nice -n 5 fio --name=warm --ioengine=nbd --uri="$(cat "$d/uri")" --rw=randread \
    --bs=64k --iodepth=8 --size="${hot}M" --loops=2 --randrepeat=0 \
    --output-format=json --output="$d/warm.json" >/dev/null
  before=$(scan_probe "$name" "$hot" "$n")
  b0=$(pol_py backend-read "$d/backend.log")
  s0=$(pol_py seq-bypass "$d/ctl.sock")
  # The scan: 1 MiB sequential reads through 4x the cache, beside the hot
  # job's random 4 KiB reads; fio stops the hot job when the scan ends.
  nice -n 5 fio --output-format=json --output="$d/mixed.json" - >/dev/null <<EOF
[global]
ioengine=nbd
uri=$(cat "$d/uri")
randrepeat=0
exitall
[hot]
rw=randread
bs=4k
iodepth=8
size=${hot}M
norandommap
time_based
runtime=300
write_lat_log=$d/hot
log_avg_msec=0
[scan]
rw=read
bs=1M
iodepth=2
offset=${c}M
size=$((c * 4))M
EOF
  b1=$(pol_py backend-read "$d/backend.log")
  s1=$(pol_py seq-bypass "$d/ctl.sock")
  after=$(scan_probe "$name" "$hot" "$n")
  b2=$(pol_py backend-read "$d/backend.log")
  # A read the backend served took at least its delay-read=8ms.
  during=$(pol_py fast-share "$d/hot_clat.1.log" 6000)
  iops=$(pol_py job "$d/mixed.json" hot read iops)
  mbps=$(pol_py job "$d/mixed.json" scan read bw_bytes)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$r" "$iops" "$before" "$during" \
    "$after" $((b1 - b0)) $((b2 - b1)) "$mbps" $((s1 - s0)) >>"$work/scan.tsv"
  echo "  scan $p run $r: hot $iops IOPS, hit ratio before $before during $during after $after," \
    "backend read $(((b1 - b0) >> 20)) MiB" >&2
  stop_servers
  rm -rf "$d"
}

# scan: a hot set (7/8 of the cache: more than the midpoint LRU's hot
# share, 2/3 of the clean blocks, which keeps a smaller hot set under
# promote=always by itself) read at random while a scan reads 4x
# the cache sequentially, RAID5 backend, cache = working set.
exp_scan ()
{
  local c r p
  c=$(mib "$ws")
  step "scan: hot set $((c * 7 / 8))M, scan $((c * 4))M, cache ${c}M, RAID5 backend"
  : >"$work/scan.tsv"
  for r in $(seq "$runs"); do
    for p in always nhit cutoff nhit-cutoff; do scan_case "$p" "$r" "$c"; done
  done
}

# burst: random 64 KiB writes of twice the cache (each block once), raw
# backend (the reference rate), wb and hhc-head, RAID5 backend; fio's
# bandwidth log in 250 ms windows.
exp_burst ()
{
  local c r p name d v
  c=$(mib "$ws")
  step "burst: $((c * 2))M of random 64K writes, cache ${c}M, RAID5 backend"
  : >"$work/burst.tsv"
  for r in $(seq "$runs"); do
    for p in raw wb hhc-head; do
      name=burst-$p-$r
      d=$work/$name
      rm -rf "$d"
      setup "$name" "$p" raid5 "${c}M"
      nice -n 5 fio --name=burst --ioengine=nbd --uri="$(cat "$d/uri")" --rw=randwrite \
        --bs=64k --iodepth=8 --size=$((c * 2))M --randrepeat=0 --continue_on_error=all \
        --write_bw_log="$d/burst" --log_avg_msec=250 --percentile_list=50:99 \
        --output-format=json --output="$d/burst.json" >/dev/null
      cp "$d/burst_bw.1.log" "$work/burst-$p-$r.bw.log"
      v=$(pol_py burst "$d/burst.json" "$d/burst_bw.1.log")
      printf '%s\t%s\t%s\n' "$p" "$r" "${v// /$'\t'}" >>"$work/burst.tsv"
      echo "  burst $p run $r: bytes/s, min, median, max lat ms, p99 ms, errors: $v" >&2
      stop_servers
      rm -rf "$d"
    done
  done
}

# hitmodel: 4 KiB random reads over the working set with a fraction r of
# it cached (NBD_CMD_CACHE of the first r of the set), mode wb,
# promote=nhit promote-hits=255 so that the misses stay out; r measured
# from the filter's counters.
exp_hitmodel ()
{
  local r x h0 h1 rmeas name d uri w prev b v
  w=$(($(mib "$ws") << 20))
  step "hitmodel: 4K random reads over $ws, r = 0 .. 1, RAID5 backend"
  : >"$work/hitmodel.tsv"
  for r in $(seq "$runs"); do
    name=hitmodel-$r
    d=$work/$name
    pol_setup "$name" raid5 "$(($(mib "$ws") * 2))M" 1024 mode=wb promote=nhit promote-hits=255
    uri=$(cat "$d/uri")
    prev=0
    for x in 0 0.25 0.5 0.75 0.9 1; do
      b=$(awk -v w="$w" -v x="$x" 'BEGIN { printf "%d", int(w * x / 4096) * 4096 }')
      [ "$b" -le "$prev" ] || pol_py prefetch "$uri" "$prev" "$b"
      prev=$b
      h0=$(pol_py hits "$d/ctl.sock")
      fio_nbd "$uri" "$d/fio.json" --rw=randread --bs=4k --iodepth=8 --numjobs=2 \
        --norandommap --time_based --runtime="$secs"
      h1=$(pol_py hits "$d/ctl.sock")
      rmeas=$(pol_py ratio "$h0" "$h1")
      v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"])' "$d/fio.json")
      printf '%s\t%s\t%s\t%s\n' "$r" "$x" "$rmeas" "$v" >>"$work/hitmodel.tsv"
      echo "  hitmodel run $r: r=$x (measured $rmeas): $v IOPS" >&2
    done
    stop_servers
    rm -rf "$d"
  done
}
