#!/usr/bin/env bash
# The write-back's own backend flush counts: when it fails while a zero
# may be unflushed, the client's next FLUSH must fail (the backend may
# have dropped the zero), although no FLUSH of the client ever saw the
# failure.
#
# The backend is tests/dropflush.py: its flush fails, and forgets what
# was not flushed, while $tmp/fail exists.  In mode wb, and in mode hhc
# with a log file, on one connection (closing it would flush):
#   x=A in the image; read x (cached clean); zero x; fail on; write y;
#   wait (stats: writeback_errors > 0) until the write-back of y has
#   failed on its backend flush; fail off; FLUSH must fail.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh python3
# Debian's nbdkit-plugin-python (scripts/install-deps installs it).
nbdkit python --dump-plugin >/dev/null 2>&1 || requires nbdkit-plugin-python
hhc=$(filter)
dropflush=$(cd "$(dirname "$0")" && pwd)/dropflush.py
make_tmpdir

export FAIL=$tmp/fail X=$(( 5 * 4096 )) Y=$(( 9 * 4096 ))

# Python for nbdsh: run the sequence; STATS names the stats file.
sequence='
import json, os, time
x, y = int(os.environ["X"]), int(os.environ["Y"])
A, C = b"A" * 4096, b"C" * 4096
mode = os.environ["MODE"]

def writeback_errors():
    try:
        with open(os.environ["STATS"]) as f:
            return json.load(f).get("writeback_errors", 0)
    except (OSError, ValueError):
        return 0

assert h.pread(4096, x) == A
h.zero(4096, x)
open(os.environ["FAIL"], "w").close()
h.pwrite(C, y)
deadline = time.monotonic() + 30
while writeback_errors() == 0:
    assert time.monotonic() < deadline, \
        "%s: the write-back of y did not fail within 30 s" % mode
    time.sleep(0.1)
os.unlink(os.environ["FAIL"])
try:
    h.flush()
    ok = True
except nbd.Error:
    ok = False
assert not ok, \
    "%s: FLUSH succeeded after the write-back'"'"'s backend flush failed " \
    "(the backend dropped the unflushed zero of x)" % mode
'

# run MODE [ARGS...]: the sequence in MODE on a fresh backend and cache.
run ()
{
  local mode=$1
  shift
  truncate -s 16M "$tmp/backend-$mode.img"
  python3 -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(b"A" * 4096)' "$tmp/backend-$mode.img" "$X"
  # Write-back soon after the client goes quiet (idle-ms).
  start_nbdkit -P "$tmp/pid" -U "$tmp/sock" \
    --filter="$hhc" python "$dropflush" file="$tmp/backend-$mode.img" \
    failfile="$FAIL" cache="$tmp/cache-$mode.img" cache-size=8M \
    mode="$mode" backend-id=flush-sticky-flusher idle-ms=100 \
    stats="$tmp/stats-$mode.json" "$@"
  MODE=$mode STATS=$tmp/stats-$mode.json nbdsh_u "$tmp/sock" -c "$sequence"
  stop_nbdkit "$tmp/pid"
}

run wb
run hhc log="$tmp/log.img" log-size=16M
echo "$_hhc_name: ok"
