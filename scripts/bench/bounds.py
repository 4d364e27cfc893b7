"""Bounds the HDD log sets on mode hhc (issue 32), for
scripts/bench/report.py.

scripts/bench/run measures each HDD model once per invocation (hdd.tsv:
model, run, B = one barrier's latency in ms, 4 KiB write + FLUSH
serially; the device's bandwidth in MB/s, 1 MiB sequential writes with a
FLUSH every 64 MiB).  For a workload with J jobs, a write share w of its
I/Os, S bytes per write, f FLUSHes per I/O, and wb's IOPS in the same
invocation:

  barrier bound    1 / (1 / wb + f * B / J)
                   a job's I/O takes at least wb's time per I/O (J / wb)
                   and each of its FLUSHes waits at least one barrier
                   (one barrier per FLUSH per job: no overlap assumed
                   between a job's FLUSH and its other I/O; at iodepth > 1
                   fio may overlap them, so there the bound is loose and
                   a fraction above 1 is possible); with f = 0 it is wb
                   itself ("wb")
  bandwidth bound  bandwidth / (w * S)
                   every written byte goes to the log at the device's
                   bandwidth (the log's own headers not counted)
  bound            the smaller of the two

hhc (delay model) and hhc-head (one-head model) are reported as a
fraction of their model's bound; hhc-file (the log on a plain file) is
the diagnostic: what the same code reaches without the HDD.
"""
import math
import os
import statistics

# model: (policy, name)
MODELS = {"delay": ("hhc", "delay model"), "head": ("hhc-head", "one-head model")}
# Block workloads (scripts/bench/run's workload_args): jobs, write
# share of the I/Os, mean bytes per write, FLUSHes per I/O.
BLOCK = {
    "websearch": (4, 0.09, 16384, 0.0),
    "fileserver": (8, 0.67, 40960, 0.67 / 64),
    "varmail": (16, 0.5, 4096, 0.5),
    "randwrite": (2, 1.0, 4096, 1.0 / 32),
    "randmixed": (2, 0.3, 4096, 0.3 / 32),
}
# ext4 varmail (scripts/bench/fsload.py): 4 operations, 2 of them an
# append + fsync (at least one log barrier each); its bytes per operation
# are not known at block level, so no bandwidth bound.
FS = {"varmail": (16, None, None, 0.5)}
GOAL = 0.9


def load_cal(work):
    """{model: {"barrier_ms": [..], "mbps": [..]}} from hdd.tsv."""
    cal = {}
    path = os.path.join(work, "hdd.tsv")
    if not os.path.exists(path):
        return cal
    for line in open(path):
        f = line.split()
        if len(f) == 4:
            c = cal.setdefault(f[0], {"barrier_ms": [], "mbps": []})
            c["barrier_ms"].append(float(f[2]))
            c["mbps"].append(float(f[3]))
    return cal


def bound(wb, params, barrier_ms, mbps):
    jobs, wshare, wbytes, f = params
    lat = 1 / (1 / wb + f * barrier_ms / 1e3 / jobs)
    bw = mbps * 1e6 / (wshare * wbytes) if wshare and wbytes else math.inf
    limit = "bandwidth" if bw < lat else ("barrier" if f else "wb")
    return {"barrier": lat, "bandwidth": bw, "bound": min(lat, bw), "limit": limit}


def cases(agg):
    """(exp, case, label, params) for every workload with hhc and wb."""
    out = []
    for e in ("iops", "wan"):
        for w, p in BLOCK.items():
            out.append((e, w, f"{e} {w}", p))
    for t in sorted(agg.get("threads", {}), key=float):
        j, ws, sz, f = BLOCK["varmail"]
        out.append(("threads", t, f"varmail {t} threads", (int(float(t)), ws, sz, f)))
    for w, p in FS.items():
        out.append(("fs", w, f"ext4 {w}", p))
    return out


def rows(agg, cal):
    """One row per workload and model: the bound and hhc's fraction."""
    def med(e, c, p):
        try:
            return agg[e][c][p]["iops"]["median"]
        except KeyError:
            return None

    res = []
    for e, c, label, params in cases(agg):
        wb = med(e, c, "wb")
        if not wb:
            continue
        for m, (pol, name) in MODELS.items():
            h = med(e, c, pol)
            if m not in cal or h is None:
                continue
            b_ms = statistics.median(cal[m]["barrier_ms"])
            mbps = statistics.median(cal[m]["mbps"])
            r = bound(wb, params, b_ms, mbps)
            r.update(exp=e, case=c, label=label, model=m, name=name, policy=pol,
                     wb=wb, hhc=h, fraction=h / r["bound"],
                     hhc_file=med(e, c, "hhc-file"), barrier_ms=b_ms, mbps=mbps)
            res.append(r)
    return res


def cal_table(cal):
    t = ["| model | barrier B, ms (4 KiB write + FLUSH, serial) | bandwidth, MB/s |",
         "|---|---|---|"]
    for m, (pol, name) in MODELS.items():
        if m in cal:
            b, w = cal[m]["barrier_ms"], cal[m]["mbps"]
            t.append(f"| {name} ({pol}) | {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}) "
                     f"| {statistics.median(w):.0f} ({min(w):.0f}-{max(w):.0f}) |")
    return "\n".join(t)


def table(res):
    t = ["| workload | model | wb | barrier bound | bandwidth bound | bound | hhc | "
         "hhc / bound | hhc-file / wb (diagnostic) |", "|---" * 9 + "|"]
    for r in res:
        bw = "-" if math.isinf(r["bandwidth"]) else f"{r['bandwidth']:.0f}"
        hf = f"{r['hhc_file'] / r['wb']:.2f}" if r["hhc_file"] else "-"
        t.append(f"| {r['label']} | {r['name']} | {r['wb']:.0f} | {r['barrier']:.0f} | {bw} | "
                 f"{r['bound']:.0f} ({r['limit']}) | {r['hhc']:.0f} ({r['policy']}) | "
                 f"**{r['fraction']:.2f}** | {hf} |")
    return "\n".join(t)


def goal_values(res):
    """(name, fraction) for the issue's goals: fileserver, varmail and
    ext4 varmail on both models."""
    want = [("iops", "fileserver"), ("iops", "varmail"), ("fs", "varmail")]
    out = []
    for e, c in want:
        for m, (pol, name) in MODELS.items():
            r = next((x for x in res if x["exp"] == e and x["case"] == c and x["model"] == m), None)
            label = f"{'ext4 ' if e == 'fs' else ''}{c}: {pol} / bound ({name})"
            out.append((label, r["fraction"] if r else None))
    return out


def flush_p99_values(agg, cal):
    """(name, p99 / B) of the 4-client FLUSH latency on each model."""
    out = []
    for m, (pol, name) in MODELS.items():
        try:
            p99 = agg["flushlat"]["flushlat"][pol]["p99"]["median"]
        except KeyError:
            continue
        if m in cal:
            b = statistics.median(cal[m]["barrier_ms"]) * 1e3
            out.append((f"FLUSH p99, 4 clients: {pol} p99 / barrier B ({name})", p99 / b))
    return out
