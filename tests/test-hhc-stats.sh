#!/usr/bin/env bash
# stats=FILE: the gateway writes its counters there as JSON.
#
# After a short workload (writes, a flush, reads of written and of
# unwritten blocks) the file must appear within 30 s, parse as JSON,
# hold the keys read_hits, read_misses, dirty, free and flushes (at the
# top level or in a nested object) as integers, and count the reads:
# read_hits + read_misses > 0.  The file is rewritten once a second, so
# this polls until the numbers show up.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh python3
hhc=$(filter)
make_tmpdir

truncate -s 16M "$tmp/backend.img"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" --filter="$hhc" \
             file "$tmp/backend.img" cache="$tmp/cache.img" cache-size=16M \
             mode=wb backend-id=stats-test stats="$tmp/stats.json"

nbdsh_u "$tmp/sock" \
  -c 'h.pwrite(b"\x11" * (1 << 20), 0)' \
  -c 'h.flush()' \
  -c 'assert h.pread(1 << 20, 0) == b"\x11" * (1 << 20)' \
  -c 'assert h.pread(1 << 20, 8 << 20) == bytes(1 << 20)'

stats_py='
import json, sys

def find(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            r = find(v, key)
            if r is not None:
                return r
    return None

try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit("not (yet) readable JSON: %s" % e)
keys = ("read_hits", "read_misses", "dirty", "free", "flushes")
vals = {k: find(s, k) for k in keys}
bad = [k for k in keys if not isinstance(vals[k], int)]
if bad:
    sys.exit("no integer value for: %s" % ", ".join(bad))
if vals["read_hits"] + vals["read_misses"] <= 0:
    sys.exit("the reads are not counted yet: %r" % vals)
'

check_stats ()
{
  python3 -c "$stats_py" "$tmp/stats.json" 2>"$tmp/stats.err"
}

if ! poll_until 30 check_stats; then
  cat "$tmp/stats.err" >&2
  [ ! -e "$tmp/stats.json" ] || cat "$tmp/stats.json" >&2
  fail "stats file not written as expected"
fi
