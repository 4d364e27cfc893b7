"""Bounds the HDD log sets on mode hhc (issue 32), for
scripts/bench/report.py.

scripts/bench/run measures each HDD model once per invocation (hdd.tsv:
model, run, B = one barrier's latency in ms, serial 4 KiB writes with
FUA, as the log writes a barrier; the device's bandwidth in MB/s, 1 MiB
sequential writes with a FLUSH every 64 MiB).  Every run also records what its client did: the
I/Os, the NBD FLUSHes (fio 3.33 sends one after every I/O, reads
included, once the write count is a multiple of --fsync: varmail's
--fsync=1 makes one FLUSH per I/O, not per write), the mean read/write
latency, and for the log's policies the log's joins: the FLUSHes that
found something new and so waited for a barrier not yet sealed, which
no device can end in less than one barrier time B.  (A FLUSH after a
read that comes when nothing was written since the last barrier waits
for nothing, or only for the rest of the barrier in flight; with few
jobs that is most FLUSHes after reads.)  For a workload with J jobs at
iodepth d, a write share w of its I/Os, S bytes per write, and f =
joins per I/O of the judged run:

  barrier bound    1 / (1 / wb + f * B / J)
                   between two barriers the machine does the J jobs' I/Os
                   at no more than wb's rate (J / wb), and each join waits
                   one barrier: the lockstep cycle B + J / wb of a log
                   whose every barrier carries all J jobs.  wb's rate
                   includes the CPU the jobs share (2 cores here), which
                   is what lengthens the cycle with J.  At d > 1 f is
                   the sync points per I/O (writes / --fsync: fio sends a
                   sync point's FLUSHes in a burst, up to d at once, which
                   share one barrier), or the joins if fewer, and fio may
                   overlap a job's FLUSH with its other I/O, so there the
                   bound is loose; with f = 0 it is wb itself ("wb")
  strict, d = 1    J / (t + f * B), t the smaller of wb's and the judged
                   policy's own mean read/write latency: each job waits
                   for its I/O, then for its join's barrier, with the CPU
                   taken as free; no schedule beats it, but it is loose
                   where the jobs share few cores (reported beside)
  bandwidth bound  bandwidth / (w * S) on the delay model: every
                   written byte goes to the log at the device's
                   bandwidth (the log's own headers not counted), and
                   the model writes the barriers beside the bytes; on
                   the one-head model 1 / (w * S / bandwidth + f * B / J):
                   the bytes and the barriers (each carrying all J jobs
                   at best) take the one head in turn
  ext4             1 / (1 / wb + F * B) operations per second, strict
                   1 / (F * B), F = joins per operation: ext4's FLUSHes
                   come from its journal's commits, one commit at a time
                   and each commit's FLUSHes in order, so no two share a
                   barrier (the measured log barriers per FLUSH, in the
                   table, show whether they did): the journal is one job
                   (J = 1); the other threads' work may overlap its
                   commits, so the first is loose and can be passed
  bound            the smaller

Runs without joins (older results, or the log's stats missing) use the
FLUSHes counted by the client (every FLUSH taken as a wait: a bound too
low at few jobs), else the workload's nominal rate.  The first reports
assumed varmail's f = 0.5 and wb's whole time per I/O, FLUSH included.

hhc (delay model) and hhc-head (one-head model) are reported as a
fraction of their model's bound; hhc-file (the log on a plain file) is
the diagnostic: what the same code reaches without the HDD.
"""
import math
import os
import statistics

# model: (policy, name)
MODELS = {"delay": ("hhc", "delay model"), "head": ("hhc-head", "one-head model")}
# Block workloads (scripts/bench/run's workload_args): jobs, iodepth,
# write share of the I/Os, mean bytes per write, and the nominal
# barriers per I/O: varmail one FLUSH per I/O, the others one sync point
# per --fsync writes.
BLOCK = {
    "websearch": (4, 4, 0.09, 16384, 0.0),
    "fileserver": (8, 2, 0.67, 40960, 0.67 / 64),
    "varmail": (16, 1, 0.5, 4096, 1.0),
    "randwrite": (2, 8, 1.0, 4096, 1.0 / 32),
    "randmixed": (2, 8, 0.3, 4096, 0.3 / 32),
}
# ext4 varmail (scripts/bench/fsload.py): threads; its bound needs the
# FLUSHes per operation, which only runs that counted them have.
FS = {"varmail": (16, 1, None, None, None)}
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


def bound(wb, params, barrier_ms, mbps, f, t_us, fs=False, head=False):
    """The bound of one workload on one model (see the module's text).
    f: barriers charged per I/O (per operation on ext4); t_us: the I/O
    time of the strict iodepth-1 bound (None: not computed); head: the
    one-head model (bytes and barriers share the head)."""
    jobs, depth, wshare, wbytes = params[:4]
    if fs:
        jobs = 1  # the journal is one serial source of FLUSHes
    b = barrier_ms / 1e3
    lat = 1 / (1 / wb + f * b / jobs)
    strict = None
    if fs:
        strict = 1 / (f * b) if f else None
    elif depth == 1 and t_us:
        strict = jobs / (t_us / 1e6 + f * b)
    if not (wshare and wbytes):
        bw = math.inf
    elif head:
        bw = 1 / (wshare * wbytes / (mbps * 1e6) + f * b / jobs)
    else:
        bw = mbps * 1e6 / (wshare * wbytes)
    limit = "bandwidth" if bw < lat else ("barrier" if f else "wb")
    return {"barrier": lat, "bandwidth": bw, "bound": min(lat, bw), "limit": limit,
            "strict": min(strict, bw) if strict else None}


def cases(agg):
    """(exp, case, label, params, fs) for every workload with hhc and wb."""
    out = []
    for e in ("iops", "wan"):
        for w, p in BLOCK.items():
            out.append((e, w, f"{e} {w}", p, False))
    for t in sorted(agg.get("threads", {}), key=float):
        p = BLOCK["varmail"]
        out.append(("threads", t, f"varmail {t} threads", (int(float(t)),) + p[1:], False))
    for w, p in FS.items():
        out.append(("fs", w, f"ext4 {w}", p, True))
    return out


def barriers_per_io(params, fs, joins, flushes):
    """(f, how): the barriers per I/O the bound charges, and where that
    figure came from ("joins", "FLUSHes", "nominal"); (None, None) when
    nothing says (ext4 without counts)."""
    nominal = params[4]
    if not fs and params[1] > 1:
        return (joins, "joins") if joins is not None and joins < nominal else (nominal, "nominal")
    if joins is not None:
        return joins, "joins"
    if flushes is not None:
        return flushes, "FLUSHes"
    return (nominal, "nominal") if nominal is not None else (None, None)


def rows(agg, cal):
    """One row per workload and model: the bound and hhc's fraction."""
    def med(e, c, p, m="iops"):
        try:
            return agg[e][c][p][m]["median"]
        except KeyError:
            return None

    res = []
    for e, c, label, params, fs in cases(agg):
        wb = med(e, c, "wb")
        if not wb:
            continue
        for m, (pol, name) in MODELS.items():
            h = med(e, c, pol)
            if m not in cal or h is None:
                continue
            f, how = barriers_per_io(params, fs, med(e, c, pol, "join_per_io"),
                                     med(e, c, pol, "flush_per_io"))
            if f is None:
                continue
            lats = [x for x in (med(e, c, "wb", "lat_us"), med(e, c, pol, "lat_us")) if x]
            b_ms = statistics.median(cal[m]["barrier_ms"])
            mbps = statistics.median(cal[m]["mbps"])
            r = bound(wb, params, b_ms, mbps, f, min(lats) if lats else None, fs,
                      head=m == "head")
            r.update(exp=e, case=c, label=label, model=m, name=name, policy=pol,
                     wb=wb, hhc=h, fraction=h / r["bound"], flush_per_io=f, how=how,
                     flushes=med(e, c, pol, "flush_per_io"),
                     barrier_per_flush=med(e, c, pol, "barrier_per_flush"),
                     hhc_file=med(e, c, "hhc-file"), barrier_ms=b_ms, mbps=mbps)
            res.append(r)
    return res


def cal_table(cal):
    t = ["| model | barrier B, ms (4 KiB FUA write, serial) | bandwidth, MB/s |",
         "|---|---|---|"]
    for m, (pol, name) in MODELS.items():
        if m in cal:
            b, w = cal[m]["barrier_ms"], cal[m]["mbps"]
            t.append(f"| {name} ({pol}) | {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}) "
                     f"| {statistics.median(w):.0f} ({min(w):.0f}-{max(w):.0f}) |")
    return "\n".join(t)


def table(res):
    t = ["| workload | model | wb | FLUSHes per I/O | barriers charged per I/O | barrier bound | "
         "bandwidth bound (one-head: bytes + barriers) | bound | hhc | hhc / bound | strict bound: hhc / it | "
         "hhc-file / wb (diagnostic) |", "|---" * 12 + "|"]
    for r in res:
        bw = "-" if math.isinf(r["bandwidth"]) else f"{r['bandwidth']:.0f}"
        hf = f"{r['hhc_file'] / r['wb']:.2f}" if r["hhc_file"] else "-"
        fl = "-" if r["flushes"] is None else f"{r['flushes']:.3f}"
        if r["barrier_per_flush"] is not None:
            fl += f" ({r['barrier_per_flush']:.2f} barriers each)"
        st = "-" if r["strict"] is None else f"{r['strict']:.0f}: {r['hhc'] / r['strict']:.2f}"
        t.append(f"| {r['label']} | {r['name']} | {r['wb']:.0f} | {fl} | "
                 f"{r['flush_per_io']:.3f} ({r['how']}) | {r['barrier']:.0f} | {bw} | "
                 f"{r['bound']:.0f} ({r['limit']}) | {r['hhc']:.0f} ({r['policy']}) | "
                 f"**{r['fraction']:.2f}** | {st} | {hf} |")
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
