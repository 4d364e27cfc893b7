# Sourced by tests/test-csi.sh: check_backend_direct BACKEND reads the
# volume's backend directly, with no cache in between (nbdkit's file
# plugin on the image, or the cos plugin on its prefix, read-only),
# mounts its ext4 read-only through nbdfuse and a loop device, and
# compares the files with what the orchestrator wrote.  Everything it
# starts it stops, by PID, before returning.

check_backend_direct ()
{
  local backend=$1 d=$tmp/direct sock dev fusepid rc=0
  mkdir -p "$d/fuse" "$d/mnt"
  sock=$d/nbd.sock
  case $backend in
    files)
      nbdkit -f -r -U "$sock" file "$tmp/images/pvc-0123456789abcdef.img" \
        </dev/null >"$d/nbdkit.log" 2>&1 & ;;
    cos)
      # shellcheck disable=SC2046  # s3_creds prints two words
      nbdkit -f -r -U "$sock" "$plugins/nbdkit-cos-plugin.so" \
        endpoint="$s3_endpoint" bucket=csi prefix=k8s/pvc-0123456789abcdef \
        $(s3_creds) \
        </dev/null >"$d/nbdkit.log" 2>&1 & ;;
  esac
  local nbdpid=$!
  poll_until 30 test -S "$sock" || fail "direct nbdkit: $(cat "$d/nbdkit.log")"
  nbdfuse -r "$d/fuse/disk" "nbd+unix:///?socket=$sock" &
  fusepid=$!
  poll_until 30 test -f "$d/fuse/disk" || fail "nbdfuse did not come up"
  dev=$(losetup -r --find --show "$d/fuse/disk")
  mount -o ro,noload "$dev" "$d/mnt" || rc=1
  if [ $rc -eq 0 ]; then
    CSI_ROOT=$d/mnt $py "$abs_top_srcdir/tests/csi/e2e.py" compare "$backend" || rc=1
    umount "$d/mnt"
  fi
  losetup -d "$dev"
  fusermount3 -u "$d/fuse" 2>/dev/null || umount "$d/fuse"
  wait "$fusepid" || true
  kill "$nbdpid"
  wait "$nbdpid" || true
  rm -rf "$d"
  [ $rc -eq 0 ] || fail "the $backend backend, read directly, lacks the files"
}
