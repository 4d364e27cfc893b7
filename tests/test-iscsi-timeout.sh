#!/usr/bin/env bash
# hhciscsi: timeout= and sessions=.
#
# (a) A target that stops answering (tgtd frozen with SIGSTOP: the
#     kernel still accepts TCP connections, nothing answers them): with
#     timeout=2 a write ends in EIO after the bounded retries instead of
#     hanging; nothing it did is acknowledged.  Once the target answers
#     again (SIGCONT), the same plugin process serves again, the data
#     flushed before the outage is intact and new writes reach the LUN.
# (b) sessions=1: four concurrent clients share one session, and every
#     write lands.
# (c) sessions= and timeout= out of range are refused with one line.
# (d) With the default timeout=0, nbdkit still exits on SIGTERM (within
#     stop_nbdkit's 60 s, status 0) while its idle sessions' target is
#     frozen: the logout at exit is bounded.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cmp
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
# Runs before _tgt_stop (cleanups run last first): never leave tgtd
# frozen, whatever happens below.
cleanup_fn kill -CONT "$tgt_pid"
truncate -s 16M "$tmp/lun.img"
add_lun iqn.2026-01.test:timeout "$tmp/lun.img"

# --- (a) ----------------------------------------------------------------
start_nbdkit -P "$tmp/a.pid" -U "$tmp/a.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=2
uri=$(nbd_uri "$tmp/a.sock")
nbdsh -u "$uri" -c 'h.pwrite(b"\xa1" * 65536, 0)' -c 'h.flush()'

kill -STOP "$tgt_pid"
# The request must end (EIO) on its own; timeout(1) only catches a
# hang, with room for 6 attempts of 2 s plus reconnects and back-off.
st=0
timeout 180 nbdsh -u "$uri" -c '
try:
    h.pwrite(b"\xb2" * 65536, 1048576)
    h.flush()
    raise SystemExit("a write to a frozen target succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e
' || st=$?
kill -CONT "$tgt_pid"
[ "$st" -ne 124 ] || fail "timeout=2 did not bound a request to a frozen target"
[ "$st" -eq 0 ] || fail "the write to a frozen target did not fail with EIO"
grep -q 'gave up after' "$tmp/nbdkit-$_hhc_nlogs.log" ||
  fail "no 'gave up' message in the log"

nbdsh -u "$uri" \
  -c 'assert h.pread(65536, 0) == b"\xa1" * 65536' \
  -c 'h.pwrite(b"\xc3" * 65536, 2097152)' -c 'h.flush()'
stop_nbdkit "$tmp/a.pid"
cmp -n 65536 "$tmp/lun.img" <(head -c 65536 /dev/zero | tr '\0' '\241') ||
  fail "data flushed before the outage is not in the LUN"
cmp -n 65536 -i 2097152:0 "$tmp/lun.img" \
  <(head -c 65536 /dev/zero | tr '\0' '\303') ||
  fail "the write after the outage is not in the LUN"

# --- (b) ----------------------------------------------------------------
start_nbdkit -P "$tmp/b.pid" -U "$tmp/b.sock" "$plugin" "$(tgt_url)" sessions=1
uri=$(nbd_uri "$tmp/b.sock")
pids=()
for k in 0 1 2 3; do
  nbdsh -u "$uri" -c "
for i in range(32):
    h.pwrite(bytes([16 * $k + 1 + i % 16]) * 4096, (4 + $k) * 1048576 + i * 4096)
h.flush()
" &
  pids+=($!)
done
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
[ "$st" -eq 0 ] || fail "a client failed with sessions=1"
stop_nbdkit "$tmp/b.pid"
python3 - "$tmp/lun.img" <<'EOF' || fail "a write is missing with sessions=1"
import sys
img = open(sys.argv[1], "rb").read()
for k in range(4):
    for i in range(32):
        off = (4 + k) * 1048576 + i * 4096
        assert img[off:off + 4096] == bytes([16 * k + 1 + i % 16]) * 4096, (k, i)
EOF

# --- (c) ----------------------------------------------------------------
for bad in sessions=0 sessions=65 timeout=-1; do
  expect_fail_with "${bad%%=*}: must be" \
    timeout 60 nbdkit -f -U "$tmp/x.sock" "$plugin" "$(tgt_url)" "$bad"
  [ "$(grep -c error "$tmp/expect-$_hhc_nexpect.err")" -eq 1 ] ||
    fail "$bad: more than one error line"
done
# --- (d) ----------------------------------------------------------------
start_nbdkit -P "$tmp/d.pid" -U "$tmp/d.sock" "$plugin" "$(tgt_url)" sessions=2
nbdsh -u "$(nbd_uri "$tmp/d.sock")" -c 'h.pwrite(b"\xd4" * 4096, 0)' \
  -c 'h.flush()'
kill -STOP "$tgt_pid"
stop_nbdkit "$tmp/d.pid"
kill -CONT "$tgt_pid"
echo "$_hhc_name: ok"
