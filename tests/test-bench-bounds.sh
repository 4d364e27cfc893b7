#!/usr/bin/env bash
# The HDD bound of scripts/bench/bounds.py (issue 32) on made-up
# results whose bounds are worked out below by hand: 1 / (1 / wb + f B / J)
# with f the log's joins per I/O, the strict J / (t + f B) beside it (t
# the smaller of wb's and the policy's own I/O latency), every FLUSH
# taken as a join when the run has no joins, the sync points (or fewer
# joins) at iodepth > 1, the nominal rate for results without counts,
# the bandwidth bound (on the one-head model bytes and barriers added),
# and ext4's 1 / (1 / wb + F B) and strict 1 / (F B).  Then report.py turns the same files into a README
# with the table.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires python3
make_tmpdir
src=$abs_top_srcdir/scripts/bench

# B = 5 ms on the head model, 4 ms on the delay model; 150 / 300 MB/s.
printf 'head\t1\t5.0\t150\ndelay\t1\t4.0\t300\n' >"$tmp/hdd.tsv"
# exp profile case policy run iops p50 p99 p999 [ios flushes lat_us barriers joins]
row () { local IFS=$'\t'; echo "$*"; }
{
  row iops raid5 varmail wb 1 10000 -1 -1 -1 20000 20000 100.0 -1 -1
  row iops raid5 varmail hhc-head 1 2824 -1 -1 -1 5648 5648 300.0 600 4000
  row iops raid5 varmail hhc 1 3000 -1 -1 -1 6000 6000 50.0 -1 -1
  row iops raid5 fileserver wb 1 8000 -1 -1 -1
  row iops raid5 fileserver hhc-head 1 4000 -1 -1 -1
  row iops raid5 fileserver hhc 1 5000 -1 -1 -1
  row iops raid5 randwrite wb 1 20000 -1 -1 -1 40000 8000 500.0 -1 -1
  row iops raid5 randwrite hhc-head 1 8000 -1 -1 -1 16000 3200 800.0 200 160
  row fs raid5 varmail wb 1 3000 -1 -1 -1 6000 -1 -1 -1 -1
  row fs raid5 varmail hhc-head 1 90 -1 -1 -1 180 360 -1 360 300
} >"$tmp/results.tsv"

PYTHONPATH=$src python3 - "$tmp" <<'PY'
import sys, report, bounds
work = sys.argv[1]
agg = report.aggregate(report.load_rows(work))
res = {(r["exp"], r["case"], r["model"]): r for r in bounds.rows(agg, bounds.load_cal(work))}

def near(a, b):
    assert abs(a - b) < 1e-6 * max(1, abs(b)), (a, b)

# varmail, head: J=16, f = 4000 joins / 5648 I/Os, wb 10000 IOPS:
# 1 / (1 / 10000 + f * 0.005 / 16); strict: t = min(100, 300) us,
# 16 / (0.0001 + f * 0.005), or the head's time if less: the bytes and
# the barriers, 1 / (0.5 * 4096 / 150e6 + f * 0.005 / 16)
r = res[("iops", "varmail", "head")]
f = 4000 / 5648
near(r["flush_per_io"], f)
assert r["how"] == "joins" and r["limit"] == "barrier"
near(r["barrier"], 1 / (1 / 10000 + f * 5e-3 / 16))
near(r["fraction"], 2824 * (1 / 10000 + f * 5e-3 / 16))
near(r["strict"], min(16 / (100e-6 + f * 5e-3),
                     1 / (0.5 * 4096 / 150e6 + f * 5e-3 / 16)))
# delay, no joins: every FLUSH a wait (f = 1); strict with hhc's own
# latency (50 us): 16 / (0.00005 + 0.004)
r = res[("iops", "varmail", "delay")]
assert r["how"] == "FLUSHes"
near(r["barrier"], 1 / (1 / 10000 + 4e-3 / 16))
near(r["strict"], 16 / (50e-6 + 4e-3))
# fileserver, head, nothing counted: iodepth 2, f = 0.67 / 64 nominal:
# 1 / (1 / 8000 + f * 0.005 / 8); on one head the bytes and the
# barriers add up: 1 / (0.67 * 40960 / 150e6 + f * 0.005 / 8)
r = res[("iops", "fileserver", "head")]
assert r["how"] == "nominal"
near(r["barrier"], 1 / (1 / 8000 + 0.67 / 64 * 0.005 / 8))
near(r["bandwidth"], 1 / (0.67 * 40960 / 150e6 + 0.67 / 64 * 0.005 / 8))
assert r["limit"] == "bandwidth"
# the delay model writes barriers beside the bytes: 300e6 / (0.67 *
# 40960) = 10931, more than 1 / (1 / 8000 + f * 0.004 / 8) = 7679
r = res[("iops", "fileserver", "delay")]
near(r["bandwidth"], 300e6 / (0.67 * 40960))
assert r["limit"] == "barrier"
near(r["fraction"], 5000 * (1 / 8000 + 0.67 / 64 * 0.004 / 8))
# randwrite, head, iodepth 8: 160 joins / 16000 I/Os = 0.01 < 1/32, so
# f = 0.01: 1 / (1 / 20000 + 0.01 * 0.005 / 2)
r = res[("iops", "randwrite", "head")]
assert r["how"] == "joins"
near(r["barrier"], 1 / (1 / 20000 + 0.01 * 0.005 / 2))
# ext4 varmail, head: F = 300 joins / 180 operations, wb 3000 ops/s:
# 1 / (1 / 3000 + F * 0.005); strict 1 / (F * 0.005)
r = res[("fs", "varmail", "head")]
near(r["barrier"], 1 / (1 / 3000 + 300 / 180 * 0.005))
near(r["fraction"], 90 * (1 / 3000 + 300 / 180 * 0.005))
near(r["strict"], 1 / (300 / 180 * 0.005))
near(r["barrier_per_flush"], 1.0)
# no delay-model row where no hhc ran
for k in (("fs", "varmail", "delay"), ("iops", "randwrite", "delay")):
    assert k not in res, k
table = bounds.table(bounds.rows(agg, bounds.load_cal(work)))
assert "| 0.010 (nominal) |" in table, table
assert "| 1.000 (FLUSHes) |" in table, table
assert "| 2.000 (1.00 barriers each) | 1.667 (joins) |" in table, table
print(table)
PY

# The plots are not under test: a gnuplot that draws nothing.
mkdir -p "$tmp/bin" "$tmp/out"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/gnuplot"
chmod +x "$tmp/bin/gnuplot"
PATH=$tmp/bin:$PATH python3 "$src/report.py" --work "$tmp" --out "$tmp/out" --exps "iops fs" --runs 1 \
  --secs 2 --ws 32M --date now --elapsed 1 --machine test --command test >/dev/null
grep -q '^| iops varmail | one-head model | 10000 | 1.000 (0.11 barriers each) | 0.708 (joins) | 3112 |.*| \*\*0.91\*\* | 4256: 0.66 |' "$tmp/out/README.md"
grep -q '^| ext4 varmail | one-head model | 3000 | 2.000 (1.00 barriers each) | 1.667 (joins) | 115 |.* | 120: 0.75 |' \
  "$tmp/out/README.md"
