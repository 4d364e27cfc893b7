# The file-system experiment of scripts/bench/run, sourced by it: ext4 on a
# loop device over nbdfuse over each policy's server, loaded by
# scripts/bench/fsload.py.  It uses run's setup, stop_servers, stats_counts,
# delta, step, and the globals work, root, runs, secs, pids, mounts, loops
# and fuses (which run's cleanup releases).
# shellcheck shell=bash disable=SC2154

# fs_mount NAME: ext4 on a loop device over nbdfuse over the case's
# server (ENVIRONMENT.md), the file sets of scripts/bench/fsload.py built
# through it (a warm cache, as Filebench builds its file set).
fs_mount ()
{
  local d=$work/$1 dev
  mkdir -p "$d/fuse" "$d/fs"
  nbdfuse "$d/fuse/disk" "$(cat "$d/uri")" >"$d/nbdfuse.log" 2>&1 &
  pids+=($!)
  fuses+=("$d/fuse")
  for _ in $(seq 100); do
    [ -f "$d/fuse/disk" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [ -f "$d/fuse/disk" ] || { echo "bench/run: nbdfuse did not start for $1" >&2; cat "$d/nbdfuse.log" >&2; exit 1; }
  # Direct I/O: a buffered loop device writes its backing file one 4 KiB
  # page at a time (one FUSE request, one NBD request in flight: ~60
  # writes/s on the RAID5 profile); with direct I/O requests go out in
  # parallel, as from a real disk's queue.
  dev=$(losetup --find --show --direct-io=on "$d/fuse/disk")
  loops+=("$dev")
  # The inode tables and journal are written now, not by ext4lazyinit
  # during the runs; 512M of the 1G volume.
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev" 512M
  mount "$dev" "$d/fs"
  mounts+=("$d/fs")
  python3 "$root/scripts/bench/fsload.py" prepare "$d/fs"
}

# Unmount every file system of the experiment, in order.
fs_umount ()
{
  local m l f
  for m in "${mounts[@]}"; do umount "$m"; done
  for l in "${loops[@]}"; do losetup -d "$l"; done
  for f in "${fuses[@]}"; do fusermount3 -u "$f"; done
  mounts=()
  loops=()
  fuses=()
}

# fs_measure CASE POLICY RUN NAME THREADS: one fsload.py run, the page
# cache dropped first (so reads reach the export), appended to
# $work/results.tsv: ops/s in the IOPS column, no latency columns, the
# operations, and the NBD FLUSHes, log barriers and log joins the
# filter counted during the run (what bounds.py needs for ext4's bound).
fs_measure ()
{
  local c=$1 pol=$2 r=$3 name=$4 t=$5 v ops f0 b0 j0 f1 b1 j1 end
  sync
  echo 3 >/proc/sys/vm/drop_caches
  read -r f0 b0 j0 < <(stats_counts "$name" "$(date +%s.%N)")
  v=$(nice -n 5 python3 "$root/scripts/bench/fsload.py" run "$work/$name/fs" "$c" "$t" "$secs")
  end=$(date +%s.%N)
  ops=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["ops"])' "$v")
  v=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["ops_per_sec"])' "$v")
  read -r f1 b1 j1 < <(stats_counts "$name" "$end")
  printf 'fs\traid5\t%s\t%s\t%s\t%s\t-1\t-1\t-1\t%s\t%s\t-1\t%s\t%s\n' "$c" "$pol" "$r" "$v" \
    "$ops" "$(delta "$f0" "$f1")" "$(delta "$b0" "$b1")" "$(delta "$j0" "$j1")" >>"$work/results.tsv"
  echo "  fs raid5 $c $pol run $r: $v ops/s" >&2
}

exp_fs ()
{
  local pols="raw wt wbflush wb hhc hhc-head hhc-file cache" p r w t
  [ "$(id -u)" = 0 ] || { echo "bench/run: fs needs root (loop devices, mount, drop_caches)" >&2; return 1; }
  # The file sets are ~65M (fsload.py), ext4's metadata and journal
  # come on top: a 256M cache holds them all, as in (1).
  step "fs: ext4 over nbdfuse + loop, RAID5 backend, cache 256M"
  for p in $pols; do setup "fs-$p" "$p" raid5 256M; fs_mount "fs-$p"; done
  for r in $(seq "$runs"); do
    for w in websearch fileserver varmail; do
      for p in $pols; do
        case $w in varmail) t=16 ;; *) t=8 ;; esac
        fs_measure "$w" "$p" "$r" "fs-$p" "$t"
      done
    done
  done
  fs_umount
  stop_servers
}
