#!/usr/bin/env bash
# The benchmarks' one-head HDD model (tests/bench/hdd-model.c, issue 32):
# its charges for a scripted sequence of requests, through its debug
# interface (tests/bench/hdd-model-trace: no clock, no sleeping), are
# compared exactly with the arithmetic written out below; then the
# plugin that uses it (nbdkit-hddmodel-plugin) serves a file: data
# written with and without FUA reads back, FLUSH works, the trace debug
# flag prints the charges, and a bad duration is refused by name.  No
# timing thresholds.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh
make_tmpdir
b=$abs_top_builddir
trace=$b/tests/bench/hdd-model-trace
plugin=$b/tests/bench/.libs/nbdkit-hddmodel-plugin.so

# rotation 4.17 ms, seek 8 ms, 150 MB/s, a 1 MiB cache.
# transfer(n) = floor(n * 1e9 / 150e6) ns:
#   65536 -> 436906, 8192 -> 54613, 4096 -> 27306,
#   524288 -> 3495253, 1048576 -> 6990506
"$trace" 4170000 8000000 150000000 1048576 >"$tmp/out" <<'SCRIPT'
# first access: a seek; absorbed by the cache
0 W 0 65536
# FLUSH arrives while the head seeks: waits; rotation + 64 KiB destaged
100 F 0 0
# sequential: no seek, no head time
20000000 W 65536 4096
# FUA: absorbed, then rotation + the 8 KiB the cache holds
20000000 WF 69632 4096
# FLUSH on an empty cache: free, but after the head's queue
20000000 F 0 0
# fills the cache exactly
30000000 W 73728 1048576
# overflows it by 512 KiB: the excess at the bandwidth
30000000 W 1122304 524288
# not sequential: seek, and the 4 KiB excess
30000000 W 0 4096
# a read: seek + transfer, the cache untouched
50000000 R 1048576 8192
# rotation + a full cache destaged
60000000 F 0 0
SCRIPT
cat >"$tmp/expected" <<'EXPECTED'
W 0 65536 start=0 finish=8000000 seek=8000000 transfer=0 barrier=0 dirty=65536
F 0 0 start=8000000 finish=12606906 seek=0 transfer=0 barrier=4606906 dirty=0
W 65536 4096 start=20000000 finish=20000000 seek=0 transfer=0 barrier=0 dirty=4096
WF 69632 4096 start=20000000 finish=24224613 seek=0 transfer=0 barrier=4224613 dirty=0
F 0 0 start=24224613 finish=24224613 seek=0 transfer=0 barrier=0 dirty=0
W 73728 1048576 start=30000000 finish=30000000 seek=0 transfer=0 barrier=0 dirty=1048576
W 1122304 524288 start=30000000 finish=33495253 seek=0 transfer=3495253 barrier=0 dirty=1048576
W 0 4096 start=33495253 finish=41522559 seek=8000000 transfer=27306 barrier=0 dirty=1048576
R 1048576 8192 start=50000000 finish=58054613 seek=8000000 transfer=54613 barrier=0 dirty=1048576
F 0 0 start=60000000 finish=71160506 seek=0 transfer=0 barrier=11160506 dirty=0
EXPECTED
diff -u "$tmp/expected" "$tmp/out" || fail "the model's charges differ from the arithmetic"

# The plugin serves a file; its charges (rotation 1 ms, seek 1 ms) are
# only printed, not timed.
truncate -s 4M "$tmp/disk.img"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" -D hddmodel.trace=1 -v "$plugin" \
  file="$tmp/disk.img" rotation=1ms seek=1ms bandwidth=150000000 cache=1M
nbdsh_u "$tmp/sock" -c '
h.pwrite(b"a" * 65536, 0, nbd.CMD_FLAG_FUA)
h.pwrite(b"b" * 4096, 65536)
h.flush()
assert h.pread(65536 + 4096, 0) == b"a" * 65536 + b"b" * 4096
assert h.can_fua() and h.can_flush() and h.can_multi_conn()
'
stop_nbdkit "$tmp/pid"
grep -q 'hddmodel: op=1 off=0 len=65536 fua=1 .* barrier=1436906 ' "$tmp"/nbdkit-*.log ||
  fail "no trace line for the FUA write (rotation 1 ms + 64 KiB at 150 MB/s)"
cmp <(head -c 65536 "$tmp/disk.img") <(head -c 65536 /dev/zero | tr '\0' a) ||
  fail "the file does not hold the written data"

st=0
nbdkit -U - "$plugin" file="$tmp/disk.img" rotation=4furlongs --run true \
  2>"$tmp/err" || st=$?
[ "$st" -ne 0 ] && grep -q 'rotation: not a duration' "$tmp/err" ||
  { cat "$tmp/err"; fail "a bad rotation= was not refused by name"; }
