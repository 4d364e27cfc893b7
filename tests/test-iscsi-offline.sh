#!/usr/bin/env bash
# hhciscsi: the target goes offline (tgtadm State offline) and comes
# back in the middle of a workload.  Each write+flush either succeeds
# or fails with an error after the retry bound; no acknowledged
# (flushed) write is lost from the LUN's backing file.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 8M "$tmp/lun.img"
add_lun iqn.2026-01.test:offline "$tmp/lun.img"
start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)" \
  sessions=2 timeout=5

# Workload: 128 rounds of a 64 KiB write + flush, logging acknowledged
# rounds; it signals "started" after round 8 so the fault lands mid-way.
nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c "
acked = open('$tmp/acked', 'w')
for i in range(128):
    try:
        h.pwrite(bytes([1 + i % 250]) * 65536, i * 65536)
        h.flush()
        acked.write('%d\n' % i); acked.flush()
    except nbd.Error as e:
        print('round %d: %s' % (i, e))
    if i == 8:
        open('$tmp/started', 'w').close()
" >"$tmp/workload.out" 2>&1 &
wl=$!
poll_until 30 test -e "$tmp/started" || fail "workload did not start"
tgtadm_ --op update --mode sys --name State -v offline
poll_until 2 false || true   # keep it offline for about 2 s
tgtadm_ --op update --mode sys --name State -v ready
wait "$wl" || { cat "$tmp/workload.out"; fail "workload crashed"; }
cat "$tmp/workload.out"

python3 -c "
data = open('$tmp/lun.img', 'rb').read()
acked = [int(l) for l in open('$tmp/acked')]
assert len(acked) >= 64, 'only %d rounds acknowledged' % len(acked)
for i in acked:
    assert data[i * 65536:(i + 1) * 65536] == bytes([1 + i % 250]) * 65536, i
print('%d acknowledged rounds intact' % len(acked))
" || fail "an acknowledged write was lost"
# The server still works after the fault.
nbdsh -u "$(nbd_uri "$tmp/n.sock")" -c 'h.pwrite(b"x" * 512, 0)' -c 'h.flush()'
stop_nbdkit "$tmp/n.pid"
