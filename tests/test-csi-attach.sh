#!/usr/bin/env bash
# hhc-csi's node helpers on a real NBD server: attach (nbdfuse plus a
# loop device with direct I/O here; kernel NBD where /dev/nbd0 and
# nbd-client exist), mkfs only when blank, mount, read-only bind
# publishes with mount(2) (mount(8) never runs: its command line
# would show the mount flags), unmount and detach leaving no loop
# device, mount or nbdfuse behind (tests/unit/csi-attach-check.c says the steps).
# Needs root (mount, losetup, FUSE): a CI run as another user fails.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdfuse losetup blkid mkfs.ext4 mount umount \
  mountpoint
if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ] || [ ! -e /dev/loop-control ]
then
  [ -z "${CI:-}" ] || fail "needs root, /dev/fuse and /dev/loop-control"
  echo "$0: SKIP: needs root, /dev/fuse and /dev/loop-control" >&2
  exit 77
fi
check=${abs_top_builddir:-.}/tests/unit/csi-attach-check
[ -x "$check" ] || fail "$check is not built"
make_tmpdir

# Mount points under $tmp, deepest first (mountinfo's escapes undone).
mounts_under ()
{
  local mp
  while read -r _ _ _ _ mp _; do
    mp=$(printf '%b' "$mp")
    case $mp in "$tmp"/*) printf '%s\n' "$mp" ;; esac
  done </proc/self/mountinfo | sort -r
}

# Loop devices on the nbdfuse file.
loops_on_disk ()
{
  losetup -n -O NAME -j "$tmp/vol.fuse/disk" 2>/dev/null || true
}

# nbdfuse's PID while attached (the program writes it).
fuse_pid ()
{
  [ -s "$tmp/attached" ] && awk '{ print $2 }' "$tmp/attached"
}

# Whatever a failed run left: unmount the file systems, detach the loop
# device (found by its file while nbdfuse still shows it), unmount
# nbdfuse and end it (by its PID).
leftovers ()
{
  local mp dev pid
  while read -r mp; do
    case $mp in ''|"$tmp/vol.fuse") ;; *) umount "$mp" || umount -l "$mp" ;; esac
  done < <(mounts_under)
  for dev in $(loops_on_disk); do losetup -d "$dev"; done
  if mountpoint -q "$tmp/vol.fuse"; then umount "$tmp/vol.fuse"; fi
  pid=$(fuse_pid) || return 0
  if [ "$pid" -gt 0 ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    poll_until 10 eval "! kill -0 $pid 2>/dev/null"
  fi
}

start_nbdkit -P "$tmp/nbdkit.pid" -U "$tmp/sock" memory 64M
cleanup_fn leftovers

# mount(8) and umount(8) must not run: mount flags may hold secrets,
# and a command line is readable by any local user.  Traps on PATH
# record a run (never their arguments) and fail.
mkdir "$tmp/trap"
for prog in mount umount; do
  printf '#!/bin/sh\necho %s >>"%s/trap/ran"\nexit 1\n' "$prog" "$tmp" \
    >"$tmp/trap/$prog"
  chmod +x "$tmp/trap/$prog"
done
PATH="$tmp/trap:$PATH" "$check" "$tmp/sock" "$tmp"
if [ -e "$tmp/trap/ran" ]; then fail "ran: $(tr '\n' ' ' <"$tmp/trap/ran")"; fi

# Nothing is left behind.
[ -z "$(mounts_under)" ] || fail "still mounted: $(mounts_under)"
[ -z "$(loops_on_disk)" ] || fail "loop device left: $(loops_on_disk)"
pid=$(fuse_pid)
if kill -0 "$pid" 2>/dev/null; then fail "nbdfuse $pid still runs"; fi
