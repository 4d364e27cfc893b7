# scripts/bench/scale's experiments startup and volumes (sourced by it:
# uses its start, wait_serving, stop, now, secs, $work, $filter, $top).

# rss_kb PID...: the summed VmRSS of the processes, in KiB.
rss_kb ()
{
  local p t=0 v
  for p in "$@"; do
    v=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

# tree PID: PID and its descendants.
tree ()
{
  local c
  echo "$1"
  for c in $(pgrep -P "$1"); do tree "$c"; done
}

# ---- startup ----

# startup_gw DIR CACHE-SIZE: the gateway's arguments.
startup_gw ()
{
  gw=(--filter="$filter" file "$1/backend.img" cache="$1/cache.img"
    ${2:+cache-size="$2"} mode=wb dirty-low=90 dirty-high=95 dirty-max=100
    idle-ms=0 backend-id=bench-scale-startup direct=true
    stats="$1/stats.json")
}

# startup_time DIR: res, seconds from start to serving; $started runs.
startup_time ()
{
  local t0 t1
  startup_gw "$1" ""
  t0=$(now)
  start "$1/sock" "${gw[@]}"
  wait_serving "$1/sock"
  t1=$(now)
  secs "$t0" "$t1"
}

exp_startup ()
{
  local d=$work/s fill=$top/build/tests/bench/cache-fill
  local slots=$((1 << 24)) used=$((1 << 23)) small=$((1 << 16))
  # data_off of 2^24 slots: 3 pages + 2 copies of 33027 pages.
  local npages=$(((slots + 507) / 508)) meta size
  meta=$(((3 + 2 * npages) * 4096))
  size=$((meta + slots * 4096))
  [ -x "$fill" ] || (cd "$top/build" && make tests/bench/cache-fill >/dev/null)
  mkdir -p "$d" "$d/small"
  truncate -s 128G "$d/backend.img"
  truncate -s 1G "$d/small/backend.img"
  startup_gw "$d" "$size"
  start "$d/sock" "${gw[@]}"
  wait_serving "$d/sock"
  stop "$started"
  "$fill" "$d/cache.img" "$used" >"$d/fill.out"
  grep -q "slots=$slots " "$d/fill.out" || { cat "$d/fill.out" >&2; exit 1; }

  local tc tk tr rss rsss rpb
  startup_time "$d" # the first load: commits pages copy B
  stop "$started"
  startup_time "$d"
  tc=$res
  sleep 1.5 # stats= is written once a second
  rss=$(rss_kb "$started")
  rpb=$(grep -o '"ram_bytes_per_block": [0-9.]*' "$d/stats.json" |
    awk '{printf "%.2f", $2}')
  kill -9 "$started"
  wait "$started" 2>/dev/null || true
  startup_time "$d"
  tk=$res
  stop "$started"
  local t0 t1
  t0=$(now)
  dd if="$d/cache.img" of=/dev/null bs=1M count=$((meta >> 20)) \
    iflag=direct status=none
  t1=$(now)
  secs "$t0" "$t1"
  tr=$res
  startup_gw "$d/small" $(((3 + 2 * 130) * 4096 + small * 4096))
  start "$d/small/sock" "${gw[@]}"
  wait_serving "$d/small/sock"
  rsss=$(rss_kb "$started")
  stop "$started"
  echo "## startup: 2^24 slots (64 GiB of 4 KiB blocks), 2^23 used" \
    "(clean and dirty alternating), mode wb, direct=true"
  echo "limit: metadata ($((meta >> 20)) MiB, both copies) read with" \
    "dd iflag=direct bs=1M: ${tr} s"
  echo "| stop | start to serving (s) | / limit (goal <= 1.5) |"
  echo "|---|---|---|"
  echo "| clean (SIGTERM) | $tc | $(echo "$tc / $tr" | bc -l | xargs printf '%.2f')x |"
  echo "| kill -9 | $tk | $(echo "$tk / $tr" | bc -l | xargs printf '%.2f')x |"
  echo "RSS: ${rss} KiB with 2^24 slots, ${rsss} KiB with 2^16: " \
    "$(echo "($rss - $rsss) * 1024 / ($slots - $small)" | bc -l |
      xargs printf '%.2f') bytes per slot (goal <= 20);" \
    "stats ram_bytes_per_block: $rpb"
}

# ---- volumes ----

# volumes_run N: res, seconds until N volumes serve; rss, their KiB.
volumes_run ()
{
  local n=$1 d=$work/v$1 i t0 t1 v vols=
  mkdir -p "$d"
  for i in $(seq "$n"); do
    truncate -s 64M "$d/v$i.img"
    v=$(printf '{"name": "v%s", "backend": {"type": "file", "path": "%s"},
 "cache": "%s", "cache_size": "16M", "backend_id": "v%s",
 "log": "%s", "log_size": "32M", "mode": "hhc"}' \
      "$i" "$d/v$i.img" "$d/v$i.cache" "$i" "$d/v$i.log")
    vols+="${vols:+,}$v"
  done
  cat >"$d/gateway.json" <<JSON
{
  "listen": {"socket": "$d/front.sock"},
  "filter": "$filter", "plugin_dir": "$top/build/.libs",
  "run_dir": "$d/run", "metrics": false,
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes": [$vols]
}
JSON
  t0=$(now)
  "$top/build/appliance/hhc-gateway" -c "$d/gateway.json" </dev/null \
    >"$d/gateway.log" 2>&1 &
  local gpid=$!
  pids+=("$gpid")
  for _ in $(seq 30000); do
    volumes_all_serve "$d" "$n" && break
    kill -0 "$gpid" 2>/dev/null || { cat "$d/gateway.log" >&2; exit 1; }
    sleep 0.01
  done
  t1=$(now)
  secs "$t0" "$t1"
  sleep 2 # idle
  # shellcheck disable=SC2046
  rss=$(rss_kb $(tree "$gpid"))
  kill "$gpid"
  wait "$gpid" 2>/dev/null || true
}

# volumes_all_serve DIR N: every export v1..vN answers.
volumes_all_serve ()
{
  nbdsh -c "
import sys
for i in range(1, $2 + 1):
    h = nbd.NBD()
    h.set_export_name('v%d' % i)
    h.connect_unix('$1/front.sock')
    h.get_size()
    h.shutdown()
" >/dev/null 2>&1
}

exp_volumes ()
{
  local n=${HHC_BENCH_VOLUMES:-64} t1 r1 tn rn rf
  volumes_run 1
  t1=$res
  r1=$rss
  volumes_run "$n"
  tn=$res
  rn=$rss
  truncate -s 64M "$work/plain.img"
  start "$work/plain.sock" file "$work/plain.img"
  wait_serving "$work/plain.sock"
  rf=$(rss_kb "$started")
  stop "$started"
  echo "## volumes: hhc-gateway, $n volumes (mode hhc, 16 MiB cache," \
    "32 MiB log, 64 MiB file backend each)"
  echo "start until every volume serves: $n volumes ${tn} s, 1 volume ${t1} s"
  echo "RSS (gateway and children): $n volumes ${rn} KiB, 1 volume ${r1}" \
    "KiB: $(((rn - r1) / (n - 1))) KiB per idle volume; limit: a plain" \
    "nbdkit file process ${rf} KiB"
}
