#!/usr/bin/env bash
# A backend flush that fails while a pass-down (a wt write, a zero) may
# be unflushed makes every later FLUSH fail, until the volume is
# reopened: the backend may have dropped the pass-down (Linux forgets
# dirty pages whose write-back failed, and its next fsync succeeds).
#
# The backend is tests/dropflush.py: its flush fails, and forgets what
# was not flushed, while $tmp/fail exists.  x is block 5.
#   wt       write x=A, FLUSH; fail on; write x=B; FLUSH fails; fail
#            off; FLUSH must still fail.  Then a clean stop must not
#            mark the cache closed: after the restart x reads A (what
#            the image durably holds), not B from the cache.
#   wbflush  x=A in the image; read x (cached clean); zero x; fail on;
#            FLUSH fails; fail off; FLUSH must still fail.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3 cmp
# Debian's nbdkit-plugin-python (scripts/install-deps installs it).
nbdkit python --dump-plugin >/dev/null 2>&1 || requires nbdkit-plugin-python
hhc=$(filter)
dropflush=$(cd "$(dirname "$0")" && pwd)/dropflush.py
make_tmpdir

x=$(( 5 * 4096 ))
export FAIL=$tmp/fail X=$x

# gw_args MODE: set gw, the gateway in MODE on backend-MODE.img.  No
# background write-back (idle-ms=0, high watermarks): only the client's
# requests flush the backend.
gw_args ()
{
  gw=(--filter="$hhc" python "$dropflush" file="$tmp/backend-$1.img"
      failfile="$FAIL" cache="$tmp/cache-$1.img" cache-size=8M mode="$1"
      backend-id=flush-sticky idle-ms=0 dirty-low=90 dirty-high=95)
}

# Python for nbdsh: flush_fails(), fail_on(), fail_off().
prelude='
import os
def flush_fails():
    try:
        h.flush()
    except nbd.Error:
        return True
    return False
def fail_on():
    open(os.environ["FAIL"], "w").close()
def fail_off():
    os.unlink(os.environ["FAIL"])
x = int(os.environ["X"])
A, B = b"A" * 4096, b"B" * 4096
'

# image_has FILE BYTE: block x of FILE holds BYTE (one character).
image_has ()
{
  python3 -c 'import sys
with open(sys.argv[1], "rb") as f:
    f.seek(int(sys.argv[3]))
    sys.exit(f.read(4096) != sys.argv[2].encode() * 4096)' "$1" "$2" "$x"
}

# ---- wt ----
truncate -s 16M "$tmp/backend-wt.img"
gw_args wt
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c '
h.pwrite(A, x)
h.flush()
fail_on()
h.pwrite(B, x)
assert flush_fails(), "wt: FLUSH succeeded while the backend flush failed"
fail_off()
assert flush_fails(), \
    "wt: a FLUSH after a failed backend flush succeeded (the backend " \
    "dropped the unflushed write of B)"
assert flush_fails(), "wt: the failed FLUSH is not sticky"
'
stop_nbdkit "$tmp/pid"
image_has "$tmp/backend-wt.img" A ||
  fail "wt: test setup: the image does not hold A at x"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c '
got = h.pread(4096, x)
assert got != B, \
    "wt: after a clean stop that followed a failed backend flush, x is " \
    "served as B from the cache while the image holds A (the cache " \
    "was marked closed)"
assert got == A, "wt: x reads neither A nor B"
assert not flush_fails(), "wt: a reopened volume still fails FLUSH"
'
stop_nbdkit "$tmp/pid"

# ---- wbflush ----
truncate -s 16M "$tmp/backend-wbflush.img"
python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(b"A" * 4096)' "$tmp/backend-wbflush.img" "$x"
gw_args wbflush
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c "$prelude" -c '
assert h.pread(4096, x) == A
h.zero(4096, x)
fail_on()
assert flush_fails(), "wbflush: FLUSH succeeded while the backend flush failed"
fail_off()
assert flush_fails(), \
    "wbflush: a FLUSH after a failed backend flush succeeded (the " \
    "backend dropped the unflushed zero)"
'
stop_nbdkit "$tmp/pid"
echo "$_hhc_name: ok"
