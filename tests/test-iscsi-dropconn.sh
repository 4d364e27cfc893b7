#!/usr/bin/env bash
# hhciscsi: the target drops every connection (tgtadm delete conn) in
# the middle of a workload, twice.  The plugin must log in again and
# retry: every write+flush round succeeds, every acknowledged round is
# in the LUN's backing file, and new sessions replaced the dropped ones,
# all of them (an idle one too, logged in by its ticker).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 8M "$tmp/lun.img"
add_lun iqn.2026-01.test:dropconn "$tmp/lun.img"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=5

sessions ()
{
  tgtadm_ --op show --mode conn --tid 1 | sed -n 's/^Session: //p' | sort -n
}

# Drop every connection the target has now.
drop_all ()
{
  local sid
  for sid in $(sessions); do
    tgtadm_ --op delete --mode conn --tid 1 --sid "$sid" --cid 0
  done
}

before=$(sessions | tail -n 1)
[ -n "$before" ] || fail "no session logged in"

# 128 rounds of a 64 KiB write + flush; the workload waits at rounds
# 20 and 60 until the test has dropped the connections (files as
# signals, bounded waits).
nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c "
import os, time
acked = open('$tmp/acked', 'w')
for i in range(128):
    if i in (20, 60):
        open('$tmp/at-%d' % i, 'w').close()
        for _ in range(600):
            if os.path.exists('$tmp/dropped-%d' % i):
                break
            time.sleep(0.1)
        else:
            raise SystemExit('the test did not drop the connections')
    h.pwrite(bytes([1 + i % 250]) * 65536, i * 65536)
    h.flush()
    acked.write('%d\n' % i); acked.flush()
" >"$tmp/workload.out" 2>&1 &
wl=$!
for i in 20 60; do
  poll_until 60 test -e "$tmp/at-$i" || fail "workload did not reach round $i"
  drop_all
  : >"$tmp/dropped-$i"
done
wait "$wl" || { cat "$tmp/workload.out"; fail "a round failed"; }

python3 -c "
data = open('$tmp/lun.img', 'rb').read()
acked = [int(l) for l in open('$tmp/acked')]
assert len(acked) == 128, 'only %d of 128 rounds acknowledged' % len(acked)
for i in acked:
    assert data[i * 65536:(i + 1) * 65536] == bytes([1 + i % 250]) * 65536, i
print('all 128 rounds acknowledged and intact')
" || fail "a write was lost or failed"

after=$(sessions | tail -n 1)
[ -n "$after" ] && [ "$after" -gt "$before" ] ||
  fail "no new session after the drops (before $before, after ${after:-none})"

# The pool heals whole, also with no request to carry the login: both
# sessions are logged in again after the drops, and after one more
# drop while idle.
two () { [ "$(sessions | wc -l)" -eq 2 ]; }
poll_until 60 two || fail "the pool did not get both sessions back: $(sessions)"
drop_all
poll_until 60 two || fail "idle sessions were not logged in again: $(sessions)"
nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c 'h.pwrite(b"\x77" * 4096, 0); h.flush()'
stop_nbdkit "$tmp/n.pid"
