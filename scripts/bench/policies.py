#!/usr/bin/env python3
"""Helpers of scripts/bench/run-policies.sh (the scan, burst and hitmodel
experiments): small measurements that the shell would do badly.

  policies.py stats SOCKET             the filter's statistics from its
                                       control socket, as JSON
  policies.py hits SOCKET              "read_hits read_misses" (a snapshot)
  policies.py seq-bypass SOCKET        seq_bypass_read_bytes (a snapshot)
  policies.py ratio BEFORE AFTER       hit ratio between two `hits` snapshots
  policies.py backend-read LOGFILE     bytes read so far, summed over the
                                       Read lines of nbdkit's log filter
  policies.py fast-share CLATLOG US    share of the I/Os in a fio clat log
                                       (log_avg_msec=0) faster than US us
  policies.py prefetch URI START END   NBD_CMD_CACHE over [START, END) in
                                       1 MiB requests (the filter fills them
                                       whatever its promote= policy)
  policies.py job JSON NAME DIR KEY    a field of one fio job (jobs not
                                       grouped): iops, bw_bytes, ...
  policies.py burst FIO-JSON BWLOG     "bytes_per_s min_bps median_bps
                                       max_lat_ms p99_lat_ms errors" of a
                                       write burst (bw log: 250 ms windows)
"""
import json
import re
import socket
import statistics
import sys


def stats(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(b"stats\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return json.loads(data.decode())


def backend_read(path):
    total = 0
    pat = re.compile(r" Read id=\d+ offset=0x[0-9a-f]+ count=(0x[0-9a-f]+)")
    with open(path, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                total += int(m.group(1), 16)
    return total


def fast_share(path, us):
    n = fast = 0
    with open(path) as f:
        for line in f:
            fld = line.split(",")
            if len(fld) < 2:
                continue
            n += 1
            if int(fld[1]) < us * 1000:  # fio logs latencies in ns
                fast += 1
    return fast / n if n else float("nan")


def prefetch(uri, start, end):
    import nbd
    h = nbd.NBD()
    h.connect_uri(uri)
    off = start
    while off < end:
        n = min(1 << 20, end - off)
        h.cache(n, off)
        off += n
    h.shutdown()


def job(path, name, d, key):
    for j in json.load(open(path))["jobs"]:
        if j["jobname"] == name:
            return j[d][key]
    raise SystemExit(f"policies.py: no job {name} in {path}")


def burst(path, bwlog):
    j = json.load(open(path))["jobs"][0]
    w = j["write"]
    bps = [int(l.split(",")[1]) * 1024 for l in open(bwlog) if l.strip()]
    if len(bps) > 2:
        bps = bps[:-1]  # the last window is partial
    lat = w["lat_ns"]
    p99 = w["clat_ns"].get("percentile", {}).get("99.000000", 0)
    errs = j.get("total_err", 0) + (1 if j.get("error") else 0)
    return (f"{w['bw_bytes']} {min(bps)} {statistics.median(bps)} "
            f"{lat['max'] / 1e6:.2f} {p99 / 1e6:.2f} {errs}")


def main(a):
    if a[0] == "stats":
        print(json.dumps(stats(a[1])))
    elif a[0] == "hits":
        s = stats(a[1])
        print(s["read_hits"], s["read_misses"])
    elif a[0] == "seq-bypass":
        print(stats(a[1])["seq_bypass_read_bytes"])
    elif a[0] == "ratio":
        h0, m0 = map(int, a[1].split())
        h1, m1 = map(int, a[2].split())
        n = (h1 - h0) + (m1 - m0)
        print(f"{(h1 - h0) / n:.4f}" if n else "nan")
    elif a[0] == "backend-read":
        print(backend_read(a[1]))
    elif a[0] == "fast-share":
        print(f"{fast_share(a[1], float(a[2])):.4f}")
    elif a[0] == "prefetch":
        prefetch(a[1], int(a[2]), int(a[3]))
    elif a[0] == "job":
        print(job(a[1], a[2], a[3], a[4]))
    elif a[0] == "burst":
        print(burst(a[1], a[2]))
    else:
        raise SystemExit(f"policies.py: unknown command {a[0]}")


if __name__ == "__main__":
    main(sys.argv[1:])
