#!/usr/bin/env python3
"""The house rules that a build can check (issue 28), run by
tests/test-structure.sh:

  1. no production C file over MAX_FILE lines;
  2. no production function over MAX_FUNC lines (Universal Ctags);
  3. no two production source files that call each other in a loop:
     the file graph comes from the built objects (nm: a file that has a
     symbol undefined calls the file that defines it), and every
     strongly connected component must be a single file;
  4. no test device in the installed modules (the .so files carry no
     crash-device symbols).

  structure.py SRCDIR BUILDDIR

Prints each violation on a line of its own and exits 1 if there is
any.  --report prints the longest files and functions as well.
"""

import os
import re
import subprocess
import sys

MAX_FILE = 1000
MAX_FUNC = 150
# Production code: everything built into the installed programs and
# modules.  tests/ and scripts/ are not.
PROD_DIRS = ["common", "gateway", "nbdkit-hhc-filter", "cos-backend",
             "iscsi-backend", "appliance"]
TEST_SYMBOLS = re.compile(r"devcrash|dev_crash|crashdev|crash_dev")


def prod_sources(srcdir):
    out = []
    for d in PROD_DIRS:
        top = os.path.join(srcdir, d)
        for root, _, files in os.walk(top):
            for f in files:
                if f.endswith(".c"):
                    out.append(os.path.relpath(os.path.join(root, f), srcdir))
    return sorted(out)


def file_lengths(srcdir, sources):
    res = []
    for s in sources:
        with open(os.path.join(srcdir, s), errors="replace") as f:
            res.append((sum(1 for _ in f), s))
    return res


def function_lengths(srcdir, sources):
    cmd = ["ctags", "--fields=+ne", "--c-kinds=f", "-o", "-"]
    cmd += [os.path.join(srcdir, s) for s in sources]
    text = subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout
    res = []
    for line in text.splitlines():
        cols = line.split("\t")
        fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
        if "line" in fields and "end" in fields:
            n = int(fields["end"]) - int(fields["line"]) + 1
            res.append((n, os.path.relpath(cols[1], srcdir), cols[0]))
    return res


def object_source(srcdir, builddir, path):
    """The source file an object was built from, or None."""
    rel = os.path.relpath(path, builddir)
    d = os.path.dirname(rel).replace("/.libs", "")
    name = os.path.basename(rel)[:-2]
    cands = [name]
    if "-" in name:
        cands.append(name.split("-", 1)[1])
    for c in cands:
        src = os.path.join(d, c + ".c")
        if os.path.exists(os.path.join(srcdir, src)):
            return src
    return None


def symbols(path, local=False):
    """Defined and undefined symbols of PATH; LOCAL counts file-local
    definitions (nm's lower-case types) as defined too."""
    types = "TDBRtdbr" if local else "TDBR"
    text = subprocess.run(["nm", path], check=True, capture_output=True,
                          text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in types:
            defined.add(parts[2])
    return defined, undefined


def call_graph(srcdir, builddir):
    defs, uses = {}, {}
    for d in PROD_DIRS:
        top = os.path.join(builddir, d)
        for root, _, files in os.walk(top):
            for f in files:
                if not f.endswith(".o"):
                    continue
                src = object_source(srcdir, builddir, os.path.join(root, f))
                if src is None:
                    continue
                de, un = symbols(os.path.join(root, f))
                for s in de:
                    defs.setdefault(s, set()).add(src)
                uses.setdefault(src, set()).update(un)
    graph = {src: set() for src in uses}
    for src, un in uses.items():
        for s in un:
            for dst in defs.get(s, ()):
                if dst != src:
                    graph[src].add(dst)
    return graph


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def modules(builddir):
    libs = os.path.join(builddir, ".libs")
    if not os.path.isdir(libs):
        return []
    return sorted(os.path.join(libs, f) for f in os.listdir(libs)
                  if f.endswith(".so"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    report = "--report" in sys.argv
    srcdir, builddir = args
    bad = []
    sources = prod_sources(srcdir)
    files = file_lengths(srcdir, sources)
    funcs = function_lengths(srcdir, sources)
    for n, s in files:
        if n > MAX_FILE:
            bad.append(f"{s}: {n} lines (the limit is {MAX_FILE})")
    for n, s, f in funcs:
        if n > MAX_FUNC:
            bad.append(f"{s}: {f} is {n} lines (the limit is {MAX_FUNC})")
    graph = call_graph(srcdir, builddir)
    if not graph:
        bad.append(f"no production objects under {builddir}: build first")
    for comp in cycles(graph):
        sub = {v: sorted(graph[v] & set(comp)) for v in comp}
        edges = "; ".join(f"{v} -> {', '.join(w)}" for v, w in sub.items())
        bad.append(f"call cycle: {edges}")
    mods = modules(builddir)
    if not mods:
        bad.append(f"no modules in {builddir}/.libs: build first")
    for m in mods:
        de, _ = symbols(m, local=True)
        hits = sorted(s for s in de if TEST_SYMBOLS.search(s))
        if hits:
            bad.append(f"{os.path.basename(m)}: test device symbols "
                       f"{', '.join(hits[:5])}")
    if report:
        print("longest files:")
        for n, s in sorted(files, reverse=True)[:10]:
            print(f"  {n:5} {s}")
        print("longest functions:")
        for n, s, f in sorted(funcs, reverse=True)[:10]:
            print(f"  {n:5} {s} {f}")
        over60 = sum(1 for n, _, _ in funcs if n > 60)
        print(f"functions: {len(funcs)}, over 60 lines: {over60}")
        print(f"files: {len(files)}, over 600 lines: "
              f"{sum(1 for n, _ in files if n > 600)}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
