"""The cache-policy sections of scripts/bench/report.py (issue 34): scan,
burst and hitmodel, from scan.tsv, burst.tsv (+ burst-POLICY-RUN.bw.log)
and hitmodel.tsv in the scratch folder (scripts/bench/run-policies.sh).
Each section is left out when its file is missing or empty.  sections()
returns the Markdown lines and a dict for results.json.
"""
import os
import statistics
import subprocess

SCAN_ORDER = ["always", "nhit", "cutoff", "nhit-cutoff"]
SCAN_NAMES = {"always": "promote=always", "nhit": "promote=nhit (promote-hits=2)",
              "cutoff": "seq-cutoff=1M", "nhit-cutoff": "promote=nhit + seq-cutoff=1M"}
BURST_ORDER = ["raw", "wb", "hhc-head"]


def rows(work, name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return []
    return [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]


def st(vals):
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "runs": vals}


def fmt(s, d=0, scale=1.0):
    return (f"{s['median'] * scale:.{d}f} ({s['min'] * scale:.{d}f}-"
            f"{s['max'] * scale:.{d}f})")


def gnuplot(script, work, name):
    path = os.path.join(work, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", path], check=True)


def group(rs, key, cols):
    """{key: {col: stat}} over the rows, cols = {name: index}."""
    g = {}
    for r in rs:
        g.setdefault(r[key], []).append(r)
    return {k: {c: st([float(r[i]) for r in v]) for c, i in cols.items()} for k, v in g.items()}


def scan_section(work, out):
    rs = rows(work, "scan.tsv")
    if not rs:
        return [], None
    agg = group(rs, 0, {"hot_iops": 2, "hit_before": 3, "hit_during": 4, "hit_after": 5,
                        "backend_scan_bytes": 6, "backend_probe_bytes": 7, "scan_bps": 8,
                        "seq_bypass_bytes": 9})
    pols = [p for p in SCAN_ORDER if p in agg]
    md = ["## (8) Hot set under long scans: promote=nhit and seq-cutoff\n",
          "Mode wb, RAID5 backend, cache = working set, hot set = 7/8 of the cache (random 4 KiB "
          "reads, 8 in flight) read while one scan reads 4x the cache sequentially in 1 MiB "
          "requests (2 in flight); fio stops the hot job when the scan ends. The hot set is "
          "warmed first (two passes of random 64 KiB reads). **Hit ratio before / after**: the "
          "filter's read_hits and read_misses (from its control socket) over a probe of distinct "
          "random 4 KiB reads of the hot set, right before and right after the scan phase (one "
          "block per read: exact). **During**: the hot job's reads that completed in under 6 ms "
          "(the backend's delay-read is 8 ms, so none of them reached it). **Backend MiB**: "
          "bytes read from the backend in the scan phase and in the after-probe (nbdkit's log "
          "filter on the backend); **cutoff bypass MiB**: the filter's seq_bypass_read_bytes in the "
          "scan phase. The hot set is larger than the midpoint LRU's hot share (2/3 of the "
          "clean blocks): a hot set within it is kept under promote=always by the LRU alone. "
          "Median (min-max) over the runs.\n",
          "| policy | hit ratio before | during scan | after scan | hot IOPS | hot IOPS / always "
          "| backend MiB (scan phase) | backend MiB (probe) | scan MB/s | cutoff bypass MiB |",
          "|---" * 10 + "|"]
    base = agg.get("always", {}).get("hot_iops", {}).get("median")
    for p in pols:
        a = agg[p]
        rel = f"{a['hot_iops']['median'] / base:.2f}" if base else "-"
        md.append(f"| {SCAN_NAMES[p]} | {fmt(a['hit_before'], 3)} | {fmt(a['hit_during'], 3)} | "
                  f"{fmt(a['hit_after'], 3)} | {fmt(a['hot_iops'])} | {rel} | "
                  f"{fmt(a['backend_scan_bytes'], 0, 1 / 1048576)} | "
                  f"{fmt(a['backend_probe_bytes'], 1, 1 / 1048576)} | "
                  f"{fmt(a['scan_bps'], 0, 1e-6)} | "
                  f"{fmt(a['seq_bypass_bytes'], 0, 1 / 1048576)} |")
    dat = os.path.join(work, "scan.dat")
    with open(dat, "w") as f:
        for p in pols:
            f.write(f"{p} {agg[p]['hit_during']['median']:.4f} {agg[p]['hit_after']['median']:.4f}\n")
    gnuplot(f"""set terminal pngcairo size 900,520 font ',10'
set output '{os.path.join(out, 'scan.png')}'
set title "Hot-set (7/8 of the cache) hit ratio under a scan of 4x the cache (median)"
set ylabel "hit ratio"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key outside right top
set grid ytics
set yrange [0:1.05]
plot '{dat}' using 2:xtic(1) title 'during the scan', '' using 3 title 'after the scan'
""", work, "scan")
    md += ["", "![scan](scan.png)", ""]
    return md, agg


def burst_section(work, out):
    rs = rows(work, "burst.tsv")
    if not rs:
        return [], None
    agg = group(rs, 0, {"bps": 2, "min_bps": 3, "median_bps": 4, "max_lat_ms": 5,
                        "p99_lat_ms": 6, "errors": 7})
    ref = agg.get("raw", {}).get("bps", {}).get("median")
    md = ["## (9) Write burst of twice the cache: throughput timeline\n",
          "Random 64 KiB writes (8 in flight, each block once) of twice the cache size, RAID5 "
          "backend, cache = working set: random writes are the case the backend is slowest at "
          "(a RAID5 small write, delay-write=16ms) and that write-back cannot merge, so once the "
          "cache is full the burst runs at what write-back frees. hhc-head logs on the one-head "
          "HDD model. **raw** is the same fio straight to the backend: its rate is the reference. "
          "Throughput per 250 ms window (fio's bandwidth log, the last partial window left out); "
          "latency is fio's per-request completion time; errors count failed requests "
          "(continue_on_error=all). Median (min-max) over the runs.\n",
          "| policy | mean MB/s | min window MB/s | median window MB/s | min / backend rate "
          "| max latency ms | p99 latency ms | failed requests |",
          "|---" * 8 + "|"]
    for p in [p for p in BURST_ORDER if p in agg]:
        a = agg[p]
        rel = f"{a['min_bps']['median'] / ref:.2f}" if ref else "-"
        md.append(f"| {p} | {fmt(a['bps'], 1, 1e-6)} | {fmt(a['min_bps'], 1, 1e-6)} | "
                  f"{fmt(a['median_bps'], 1, 1e-6)} | {rel} | {fmt(a['max_lat_ms'], 1)} | "
                  f"{fmt(a['p99_lat_ms'], 1)} | {int(sum(a['errors']['runs']))} |")
    plots = []
    for p in ("wb", "hhc-head"):
        log = os.path.join(work, f"burst-{p}-1.bw.log")
        if os.path.exists(log):
            plots.append(f"'{log}' using ($1/1000):($2*1024/1e6) with linespoints lw 2 "
                         f"title '{p} (run 1)'")
    if ref:
        plots.append(f"{ref / 1e6:.3f} with lines dt 2 lw 2 title 'backend rate (raw, median)'")
    if plots:
        gnuplot(f"""set terminal pngcairo size 900,520 font ',10'
set output '{os.path.join(out, 'burst.png')}'
set title "Write burst of 2x the cache: throughput per 250 ms"
set xlabel "s"
set ylabel "MB/s"
set datafile separator ','
set key outside right top
set grid
set yrange [0:*]
plot {', '.join(plots)}
""", work, "burst")
        md += ["", "![burst](burst.png)"]
    md.append("")
    return md, agg


def model(r, s, h):
    return 1 / (r / s + (1 - r) / h)


def hitmodel_section(work, out):
    rs = rows(work, "hitmodel.tsv")
    if not rs:
        return [], None
    agg = group(rs, 1, {"r_measured": 2, "iops": 3})
    xs = sorted(agg, key=float)
    if "0" not in agg or "1" not in agg:
        return [], None
    h, s = agg["0"]["iops"]["median"], agg["1"]["iops"]["median"]
    md = ["## (10) The hit-ratio model: IOPS against hit ratio\n",
          "4 KiB random reads (2 jobs x 8 in flight) over the working set, RAID5 backend, mode "
          "wb, `promote=nhit promote-hits=255` so that the measurement's misses stay out of the "
          "cache; a fraction r of the set is put in the cache first (NBD_CMD_CACHE, which fills "
          "whatever promote= says), r measured is read_hits / (read_hits + read_misses) of the "
          "run (the control socket's counters). S = IOPS at r = 1 "
          f"({s:.0f}), H = IOPS at r = 0 ({h:.0f}), model C = 1 / (r/S + (1-r)/H) at the "
          "measured r. Median (min-max) over the runs.\n",
          "| r | r measured | IOPS measured | model C | measured / model |", "|---|---|---|---|---|"]
    res = []
    for x in xs:
        a = agg[x]
        c = model(min(max(a["r_measured"]["median"], 0), 1), s, h)
        md.append(f"| {x} | {fmt(a['r_measured'], 3)} | {fmt(a['iops'])} | {c:.0f} | "
                  f"{a['iops']['median'] / c:.2f} |")
        res.append(dict(r=float(x), r_measured=a["r_measured"], iops=a["iops"], model=c))
    dat = os.path.join(work, "hitmodel.dat")
    with open(dat, "w") as f:
        for x in xs:
            f.write(f"{agg[x]['r_measured']['median']:.4f} {agg[x]['iops']['median']:.1f}\n")
    gnuplot(f"""set terminal pngcairo size 900,520 font ',10'
set output '{os.path.join(out, 'hitmodel.png')}'
set title "4 KiB random read IOPS against hit ratio"
set xlabel "hit ratio r"
set ylabel "IOPS (log scale)"
set logscale y
set key left top
set grid
set xrange [0:1]
S = {s:.3f}
H = {h:.3f}
set samples 201
plot 1 / (x / S + (1 - x) / H) with lines lw 2 title 'model 1 / (r/S + (1-r)/H)', \\
     '{dat}' using 1:2 with points pt 7 ps 1.5 title 'measured (median)'
""", work, "hitmodel")
    md += ["", "![hitmodel](hitmodel.png)", ""]
    return md, {"S": s, "H": h, "points": res}


def sections(work, out):
    md, res = [], {}
    for name, fn in (("scan", scan_section), ("burst", burst_section),
                     ("hitmodel", hitmodel_section)):
        m, r = fn(work, out)
        md += m
        if r is not None:
            res[name] = r
    return md, res
