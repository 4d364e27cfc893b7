#!/usr/bin/env python3
"""File-system level workloads for scripts/bench/run (not a test).

Filebench is not packaged for Debian 12, so this emulates its three
personalities that the HHC paper uses, on a mounted file system:

  websearch   (Filebench webserver) open a random file of the set, read it
              whole, close; every 10 reads one 16 KiB append to a shared
              log file, which starts over at 64 MiB (10:1 read-mostly,
              16 KiB files)
  fileserver  create a file and write it whole, append to a random file,
              read a random file whole, delete a random file, stat one
              (1:2 read:write, 64 KiB mean file size)
  varmail     delete a file; create, append 4 KiB, fsync, close; open a
              file, append 4 KiB, fsync, close; open a file, read it whole
              (small appends, fsync after each)

  fsload.py prepare DIR             build the three file sets under DIR
  fsload.py run DIR WORKLOAD THREADS SECONDS

'run' prints one JSON line: {"ops": N, "secs": T, "ops_per_sec": N/T}.
T includes a syncfs() at the end, so the writes the page cache still
holds count against the run (fileserver and websearch never fsync; a
4-second run would otherwise measure only RAM).  Every thread works on
files of its own (as Filebench's threads mostly do) with its own random
generator, so two runs of one configuration do the same kind of work.
"""

import ctypes
import json
import os
import random
import sys
import threading
import time

LOG_MAX = 64 << 20  # websearch's shared log file
SETS = {
    # name: (files per thread slot, file size, thread slots)
    "websearch": (100, 16384, 16),  # 25 MiB
    "fileserver": (20, 65536, 16),  # 20 MiB
    "varmail": (40, 16384, 32),  # 20 MiB
}
CHUNK = 4096


def fill(path, size, rnd):
    with open(path, "wb") as f:
        f.write(rnd.randbytes(size))


def prepare(top):
    rnd = random.Random(1)
    for name, (n, size, slots) in SETS.items():
        for t in range(slots):
            d = os.path.join(top, name, "t%02d" % t)
            os.makedirs(d, exist_ok=True)
            for i in range(n):
                fill(os.path.join(d, "f%05d" % i), size, rnd)
        with open(os.path.join(top, name, "log"), "wb"):
            pass
    os.sync()


def read_whole(path):
    try:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
        return True
    except FileNotFoundError:
        return False


def append(path, data, sync):
    with open(path, "ab") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


class Worker(threading.Thread):
    def __init__(self, top, name, t, deadline):
        super().__init__(daemon=True)
        self.dir = os.path.join(top, name, "t%02d" % t)
        self.log = os.path.join(top, name, "log")
        self.name_ = name
        self.deadline = deadline
        self.rnd = random.Random(t * 7919 + int(time.time()))
        self.files = sorted(os.listdir(self.dir))
        # New files are numbered after every file an earlier run created
        # (a name taken twice would be deleted twice).
        self.next = max([int(f[1:]) for f in self.files if f[0] == "n"] + [0])
        self.ops = 0
        self.error = None

    def pick(self):
        return os.path.join(self.dir, self.rnd.choice(self.files))

    def new_name(self):
        self.next += 1
        return "n%07d" % self.next

    def websearch(self):
        for _ in range(10):
            read_whole(self.pick())
            self.ops += 1
        with open(self.log, "ab") as f:
            f.write(self.rnd.randbytes(16384))
            # The shared log starts over at LOG_MAX: run after run it
            # would fill the 512M file system (ENOSPC).
            if f.tell() >= LOG_MAX:
                f.truncate(0)
        self.ops += 1

    def fileserver(self):
        r = self.rnd
        n = self.new_name()
        fill(os.path.join(self.dir, n), r.randrange(16384, 2 * 65536, CHUNK), r)
        self.files.append(n)
        append(self.pick(), r.randbytes(16384), False)
        read_whole(self.pick())
        if len(self.files) > 1:
            victim = self.files.pop(r.randrange(len(self.files)))
            os.unlink(os.path.join(self.dir, victim))
        os.stat(self.pick())
        self.ops += 5

    def varmail(self):
        r = self.rnd
        if len(self.files) > 1:
            victim = self.files.pop(r.randrange(len(self.files)))
            os.unlink(os.path.join(self.dir, victim))
        n = self.new_name()
        append(os.path.join(self.dir, n), r.randbytes(CHUNK), True)
        self.files.append(n)
        append(self.pick(), r.randbytes(CHUNK), True)
        read_whole(self.pick())
        self.ops += 4

    def run(self):
        step = getattr(self, self.name_)
        try:
            while time.monotonic() < self.deadline:
                step()
        except Exception as e:  # reported by the main thread
            self.error = e


def run(top, name, threads, secs):
    if name not in SETS or not 1 <= threads <= SETS[name][2]:
        sys.exit("fsload: bad workload or thread count: %s %d" % (name, threads))
    libc = ctypes.CDLL(None, use_errno=True)
    t0 = time.monotonic()
    ws = [Worker(top, name, t, t0 + secs) for t in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    fd = os.open(top, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            sys.exit("fsload: syncfs: %s" % os.strerror(ctypes.get_errno()))
    finally:
        os.close(fd)
    elapsed = time.monotonic() - t0
    for w in ws:
        if w.error:
            sys.exit("fsload: %s thread: %r" % (name, w.error))
    ops = sum(w.ops for w in ws)
    print(json.dumps({"ops": ops, "secs": round(elapsed, 3),
                      "ops_per_sec": round(ops / elapsed, 1)}))


def main(argv):
    if len(argv) == 3 and argv[1] == "prepare":
        prepare(argv[2])
    elif len(argv) == 6 and argv[1] == "run":
        run(argv[2], argv[3], int(argv[4]), float(argv[5]))
    else:
        sys.exit(__doc__.split("\n\n")[2])


if __name__ == "__main__":
    main(sys.argv)
