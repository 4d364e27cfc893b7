#!/usr/bin/env bash
# hhciscsi: a reset of the logical unit (UNIT ATTENTION, ASC 29h) may
# have dropped the writes the target held in its volatile cache.  tgtd
# keeps its data in the host's page cache and cannot really drop it,
# so this test checks the plugin's decision, through NBD:
#
# (a) A LOGICAL UNIT RESET with every write flushed loses nothing: the
#     next flush succeeds, and so do writes spread over both sessions
#     and a flush after them (tgtd reports the reset on every session;
#     the plugin must not take the second report, after new writes,
#     for a new reset).
# (b) A reconnection (tgtd drops every connection; the new I_T nexus
#     reports 29h/00h at login, which libiscsi's login consumes) with
#     a write not yet flushed is not a reset: the flush succeeds and
#     the write is in the LUN.
# (c) A write not flushed, then a LOGICAL UNIT RESET: the flush fails
#     with EIO, and so does every later one, with one error line naming
#     the target; reads still work.  A new nbdkit flushes again.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3 cmp
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 8M "$tmp/lun.img"
add_lun iqn.2026-01.test:reset "$tmp/lun.img"

sessions ()
{
  tgtadm_ --op show --mode conn --tid 1 | sed -n 's/^Session: //p' | sort -n
}

# --- (a) ----------------------------------------------------------------
start_nbdkit -P "$tmp/a.pid" -U "$tmp/a.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=10
log=$tmp/nbdkit-$_hhc_nlogs.log
uri=$(nbd_uri "$tmp/a.sock")
nbdsh -u "$uri" -c 'h.pwrite(b"\xa1" * 65536, 0)' -c 'h.flush()'
tgt_lun_reset
nbdsh -u "$uri" -c 'h.flush()' || fail "(a) a flush after a clean reset failed"
# 32 writes in flight at once use both sessions; then a flush.
nbdsh -u "$uri" -c '
cookies = [h.aio_pwrite(bytes([0x40 + i]) * 4096, 1048576 + i * 4096)
           for i in range(32)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)
h.flush()
' || fail "(a) writes and a flush after a clean reset failed"

# --- (b) ----------------------------------------------------------------
nbdsh -u "$uri" -c 'h.pwrite(b"\xb2" * 65536, 2097152)'
before=$(sessions | tail -n 1)
for sid in $(sessions); do
  tgtadm_ --op delete --mode conn --tid 1 --sid "$sid" --cid 0
done
nbdsh -u "$uri" -c 'h.flush()' ||
  fail "(b) a flush after a reconnection (not a reset) failed"
after=$(sessions | tail -n 1)
[ -n "$after" ] && [ "$after" -gt "$before" ] ||
  fail "(b) no new session (before $before, after ${after:-none})"
! grep -q 'was reset' "$log" || fail "(a) or (b) was taken for a lost write"
stop_nbdkit "$tmp/a.pid"
cmp -n 65536 -i 2097152:0 "$tmp/lun.img" \
  <(head -c 65536 /dev/zero | tr '\0' '\262') ||
  fail "(b) the write flushed after the reconnection is not in the LUN"

# --- (c) ----------------------------------------------------------------
start_nbdkit -P "$tmp/c.pid" -U "$tmp/c.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=10
log=$tmp/nbdkit-$_hhc_nlogs.log
uri=$(nbd_uri "$tmp/c.sock")
nbdsh -u "$uri" -c 'h.pwrite(b"\xc3" * 65536, 0)' -c 'h.flush()' \
  -c 'h.pwrite(b"\xc4" * 65536, 65536)'
tgt_lun_reset
nbdsh -u "$uri" -c '
for n in (1, 2):
    try:
        h.flush()
        raise SystemExit("flush %d succeeded after a reset with an"
                         " unflushed write" % n)
    except nbd.Error as e:
        assert e.errno == "EIO", e
assert h.pread(65536, 0) == b"\xc3" * 65536
' || fail "(c) a flush after a reset that may have lost a write did not fail"
nbdsh -u "$uri" -c '
try:
    h.flush()
    raise SystemExit("a flush from a new connection succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e
' || fail "(c) the failure is not sticky"
n=$(grep -c "iqn.2026-01.test:reset.* was reset.*may be lost" "$log" || true)
[ "$n" -eq 1 ] || fail "(c) expected one error line about the reset, got $n"
stop_nbdkit "$tmp/c.pid"

# A new nbdkit starts clean.
start_nbdkit -P "$tmp/d.pid" -U "$tmp/d.sock" "$plugin" "$(tgt_url)" sessions=2
nbdsh -u "$(nbd_uri "$tmp/d.sock")" -c 'h.pwrite(b"\xd5" * 4096, 0)' \
  -c 'h.flush()' || fail "a restarted nbdkit cannot flush"
stop_nbdkit "$tmp/d.pid"
echo "$_hhc_name: ok"
