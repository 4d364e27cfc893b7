#!/usr/bin/env bash
# hhciscsi: on a thin-provisioned tgt LUN, trim is offered and UNMAP
# deallocates: the trimmed range of the backing file reads as zeroes
# (tgt punches a hole).  Zero (WRITE SAME where the LUN offers it)
# zeroes its range too.  On a thick LUN trim is not offered.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh nbdinfo
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
head -c 8M /dev/urandom >"$tmp/lun.img"
add_lun iqn.2026-01.test:thin "$tmp/lun.img" thin_provisioning=1

start_nbdkit -P "$tmp/n.pid" -U "$tmp/n.sock" "$plugin" "$(tgt_url)"
nbdsh -u "$(nbd_uri "$tmp/n.sock")" \
  -c 'assert h.can_trim()' \
  -c 'h.trim(1 << 20, 1 << 20)' \
  -c 'h.zero(4 << 20, 3 << 20)' \
  -c 'h.flush()' \
  -c 'assert h.pread(1 << 20, 1 << 20) == bytes(1 << 20)' \
  -c 'assert h.pread(4 << 20, 3 << 20) == bytes(4 << 20)'
stop_nbdkit "$tmp/n.pid"
python3 -c "
f = open('$tmp/lun.img', 'rb'); f.seek(1 << 20)
assert f.read(1 << 20) == bytes(1 << 20), 'trimmed range not zero'
f.seek(0); assert f.read(1 << 20) != bytes(1 << 20), 'untrimmed range lost'
f.seek(3 << 20); assert f.read(4 << 20) == bytes(4 << 20), 'zeroed range not zero'
f.seek(7 << 20); assert f.read(1 << 20) != bytes(1 << 20), 'range after zero lost'
" || fail "UNMAP or zero did not zero the backing file's range"
