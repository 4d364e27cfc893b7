#!/usr/bin/env bash
# hhcctl volume remove --drain against a client that writes during the
# drain: the remove must not report success while the write is only in
# the cache.
#
# The volume's backend is an nbd backend pointing at a second nbdkit
# (the sh plugin over a file) whose flush blocks on a FIFO once the
# test has armed it: the drain's last backend flush, after its
# write-back wrote block A back and flushed.  Held there,
# the test writes block B through the gateway (acknowledged into the
# cache, mode wb, idle-ms=0 so nothing writes it back), then opens the
# gate.  Then, usually:
#   - remove exits 1, its last line "was written to during the drain";
#   - the volume file is back, the volume is served again and B reads
#     back through the gateway;
#   - remove --drain again (the gate is used once): exit 0, the volume
#     is gone, and the backend file holds A and B.
# Under load the drain's write-back may still be running when B comes
# and take B with it: then remove exits 0 and B must be in the backend.
# Exit 0 with B only in the cache is the failure this test is for.
# No sleeps: the FIFOs order every step.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh timeout
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
[ -x "$gateway" ] && [ -x "$hhcctl" ] || fail "hhc-gateway or hhcctl not built"
gate=$tmp/gate
mkdir "$gate"
mkfifo "$gate/reached.fifo" "$gate/open.fifo" "$tmp/bdone.fifo"
truncate -s 16M "$tmp/backend.img"

# The backend: pwrite/pread on backend.img.  Once $gate/armed exists,
# a pwrite leaves $gate/wrote, and the flush after it (the write-back
# batch's own flush) trades it for $gate/batched.  The first flush
# with no write before it after that (the drain's last one, after
# every dirty block was written back; only one: mkdir is atomic) says
# so on reached.fifo and waits for a line on open.fifo.  No multi-conn,
# so that every FLUSH flushes the backend.
cat >"$tmp/backend.sh" <<EOF
#!/usr/bin/env bash
img=$tmp/backend.img
gate=$gate
EOF
cat >>"$tmp/backend.sh" <<'EOF'
case $1 in
  thread_model) echo parallel ;;
  open) echo h ;;
  get_size) stat -L -c %s "$img" ;;
  can_write | can_flush) exit 0 ;;
  can_multi_conn) exit 3 ;;
  pread) dd if="$img" iflag=skip_bytes,count_bytes skip="$4" count="$3" \
           status=none ;;
  pwrite)
    dd of="$img" oflag=seek_bytes seek="$4" conv=notrunc status=none
    if [ -e "$gate/armed" ]; then : >"$gate/wrote"; fi ;;
  flush)
    if [ -e "$gate/wrote" ]; then
      rm "$gate/wrote"
      : >"$gate/batched"
    elif [ -e "$gate/batched" ] && mkdir "$gate/taken" 2>/dev/null; then
      echo reached >"$gate/reached.fifo"
      read -r _ <"$gate/open.fifo"
    fi ;;
  *) exit 2 ;;
esac
EOF
chmod +x "$tmp/backend.sh"
start_nbdkit -P "$tmp/backend.pid" -U "$tmp/backend.sock" \
  sh "$tmp/backend.sh"

cat >"$tmp/gateway.json" <<EOF
{
  "listen": {"socket": "$tmp/front.sock"},
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$tmp/run", "metrics": false,
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes_dir": "$tmp/vol.d",
  "volumes": []
}
EOF
cat >"$tmp/v.json" <<EOF
{"name": "v", "backend": {"type": "nbd",
  "uri": "nbd+unix:///?socket=$tmp/backend.sock"},
 "cache": "$tmp/v.cache", "cache_size": "4M", "backend_id": "v",
 "mode": "wb", "tuning": {"idle-ms": 0}}
EOF

ctl ()
{
  "$hhcctl" volume "$1" --config "$tmp/gateway.json" "${@:2}"
}
served ()
{
  ctl list | grep -Eq "^v +nbd +yes\$"
}
front ()
{
  nbdsh -u "nbd+unix:///v?socket=$tmp/front.sock" -c "$1"
}
# At exit, before the gateway and the backend stop: a flush held at
# the gate (the test failed there) is let go, and no other is held.
release_gate ()
{
  mkdir -p "$gate/taken"
  exec 7<>"$gate/reached.fifo" 8<>"$gate/open.fifo"
  echo go >&8
  exec 7>&- 8>&-
}
# The test's background commands (remove, the writer of B): ended at
# exit if still running.
bg_pids=()
kill_bg ()
{
  local p
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

start_gateway "$gateway" "$tmp/gateway.json"
cleanup_fn kill_bg
cleanup_fn release_gate
poll_until 60 test -s "$tmp/run/hhc-gateway.pid" ||
  fail "the gateway did not come up"
ctl add --wait 60 "$tmp/v.json" || fail "volume add v failed"

# A at 1 MiB, B at 2 MiB (whole cache blocks).
head -c 65536 /dev/urandom >"$tmp/A"
head -c 65536 /dev/urandom >"$tmp/B"
front "h.pwrite(open('$tmp/A', 'rb').read(), 1048576); h.flush()"
[ ! -e "$gate/wrote" ] || fail "a backend write before the gate was armed"
: >"$gate/armed"

ctl remove --drain --wait 60 v >"$tmp/remove.out" 2>"$tmp/remove.err" &
remove_pid=$!
bg_pids+=("$remove_pid")
timeout 120 head -n 1 "$gate/reached.fifo" >/dev/null ||
  fail "the drain's backend flush never came: $(cat "$tmp/remove.err")"
kill -0 "$remove_pid" 2>/dev/null || fail "remove ended before its flush did"
cmp -s -n 65536 -i 1048576:0 "$tmp/backend.img" "$tmp/A" ||
  fail "A not written back before the drain's flush"

# B while the drain's flush is held; acknowledged when the line comes.
front "h.pwrite(open('$tmp/B', 'rb').read(), 2097152)
open('$tmp/bdone.fifo', 'w').write('ok\n')" &
write_pid=$!
bg_pids+=("$write_pid")
timeout 120 head -n 1 "$tmp/bdone.fifo" >/dev/null ||
  fail "the write of B during the drain was not acknowledged"
echo go >"$gate/open.fifo"
st=0
wait "$write_pid" || st=$?
[ "$st" -eq 0 ] || fail "the client writing B exited with status $st"
st=0
wait "$remove_pid" || st=$?
# What must hold either way: remove never reports success while B is
# only in the cache.  Usually the held flush is the drain's last one
# and remove finds B in the stopped cache (status 1, the volume served
# again); under load the write-back may still be running when B comes
# and take B with it (status 0, B in the backend).  Both are right;
# exit 0 with B missing from the backend is the bug.
if [ "$st" -eq 0 ]; then
  cmp -s -n 65536 -i 2097152:0 "$tmp/backend.img" "$tmp/B" ||
    fail "remove --drain exited 0 but B is not in the backend"
  [ ! -e "$tmp/vol.d/v.json" ] || fail "v.json still there after exit 0"
  echo "$_hhc_name: (the drain took B with it: status 0, B in the backend)"
  : >"$tmp/v.json.gone"
else
  [ "$st" -eq 1 ] ||
    fail "remove --drain during a write: status $st ($(cat "$tmp/remove.err"))"
  # The last line says what happened (the check before it says why).
  tail -n 1 "$tmp/remove.err" |
    grep -q '^hhcctl volume remove: volume v was written to during the drain' ||
    fail "remove --drain said: $(cat "$tmp/remove.err")"
  cmp -s -n 65536 -i 2097152:0 "$tmp/backend.img" "$tmp/B" &&
    fail "B reached the backend, yet remove said it did not"

  # Served again, with B.
  [ -e "$tmp/vol.d/v.json" ] || fail "v.json not put back"
  served || fail "v not served after the failed remove: $(ctl list)"
  front "assert h.pread(65536, 2097152) == open('$tmp/B', 'rb').read()
assert h.pread(65536, 1048576) == open('$tmp/A', 'rb').read()"
fi

# Again, nobody writing: drained, removed, A and B in the backend.
if [ ! -e "$tmp/v.json.gone" ]; then
  ctl remove --drain --wait 60 v 2>"$tmp/remove.err" ||
    fail "the second remove --drain failed: $(cat "$tmp/remove.err")"
fi
[ ! -e "$tmp/vol.d/v.json" ] || fail "v.json still there"
ctl list | grep -q '^v ' && fail "v still listed"
cmp -n 65536 -i 1048576:0 "$tmp/backend.img" "$tmp/A" ||
  fail "the backend lacks A"
cmp -n 65536 -i 2097152:0 "$tmp/backend.img" "$tmp/B" ||
  fail "the backend lacks B"
echo "$_hhc_name: ok"
