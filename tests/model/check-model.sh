#!/usr/bin/env bash
# tests/model/check-model.sh: model-check the HHC barrier-log protocol
# (tests/model/hhclog.pml) with spin, exhaustively, in a few
# configurations; fail on any property violation or incomplete search.
# Then run-mutants: every deliberate protocol bug must be caught.
#
# Needs spin and a C compiler (HHC_MODEL_CC, default clang if installed:
# it compiles pan.c at -O0 three times faster than gcc; else cc).
# Without spin the test is skipped, or fails when CI is set.
# HHC_MODEL_FULL=1 adds larger configurations (minutes, several GB).
# HHC_MODEL_MEMLIM: MB per search (default 1000, 4000 with
# HHC_MODEL_FULL); a search that reaches it fails.  See README.md here.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"

cc=${HHC_MODEL_CC:-$(command -v clang >/dev/null 2>&1 && echo clang || echo cc)}
if [ -n "${HHC_MODEL_FULL:-}" ]; then
  memlim=${HHC_MODEL_MEMLIM:-4000}
else
  memlim=${HHC_MODEL_MEMLIM:-1000}
fi
requires spin "$cc" timeout
make_tmpdir

here=$(cd "$(dirname "$0")" && pwd)
model=$here/hhclog.pml
source "$here/sums.sh"
checked=("$model" "$here/run-mutants" "$here/check-model.sh" "$here/sums.sh")
if model_unchanged check-model "${checked[@]}"; then
  echo "check-model: hhclog.pml, run-mutants and check-model.sh are as" \
    "last checked in full (checked.sha256): not run again" \
    "(HHC_MODEL_ALWAYS=1 runs them)"
  exit 0
fi

# name | spin -D options | what it adds (the defaults: MAXOPS=3
# operations over MAXRUNS=2 runs, MAXWB=1 write-back per run, no mirror
# failing while running).  The longest first: two run at a time.
configs=(
  "wal|-DWAL|write-ahead log: FLUSH = barrier only, checkpoints, redo at restart"
  "main||crash anywhere, SSD loss, a mirror lost, restart on the intact SSD"
  "emerg|-DEMERG_FULL -DALL2=1 -DMAXRUNS=1 -DMAXWB=2|emergency barriers also in a full log, with no ticket owed"
  "rebase|-DNPOS=5|a log big enough to re-log two dirty blocks at start-up, barriers during it"
  "all2|-DALL2=1 -DMAXRUNS=1 -DMAXWB=2|both clients write and trim"
  "pipe2-mirrors|-DINFLIGHT=2 -DMAXFAIL=2 -DMAXOPS=2|two barriers in flight (issue 32), mirrors failing meanwhile"
  "pipe2|-DINFLIGHT=2 -DMAXRUNS=1|two barriers in flight, each durable on each mirror in any order"
  "pipe2-runs2|-DINFLIGHT=2 -DMAXOPS=2|two barriers in flight, over two runs (restart, re-log)"
  "pipe3|-DINFLIGHT=3 -DMAXOPS=2|three barriers in flight"
  "bfail|-DBFAIL -DMAXRUNS=1|backend flushes fail and drop unflushed writes: sticky FLUSH errors (fix 9, 10, 11)"
  "wal-mirrors|-DWAL -DMAXFAIL=2 -DMAXOPS=2|write-ahead log, mirrors failing down to none"
  "heal|-DHEAL -DMAXFAIL=2 -DMAXOPS=2 -DMAXRUNS=1|failed mirrors keep their stale log and heal; voided (fix 8)"
  "mirrors|-DMAXFAIL=2 -DMAXOPS=2|mirrors fail while running, down to none (wbflush)"
  "bfail-mirrors|-DBFAIL -DMAXFAIL=2 -DMAXOPS=2 -DMAXRUNS=1|failing backend flushes, and FLUSHes that write back (no mirror left)"
)
if [ -n "${HHC_MODEL_FULL:-}" ]; then
  configs+=(
    "mirrors-deep|-DMAXFAIL=2 -DMAXRUNS=1|more operations with failing mirrors"
    "ops4|-DMAXOPS=4 -DMAXRUNS=1|four operations in one run"
    "ops3-wb2|-DMAXWB=2|two write-backs per run"
    "emerg-main|-DEMERG_FULL|emergency barriers in a full log, two runs"
    "rebase-deep|-DNPOS=5 -DMAXWB=0 -DMAXRECLAIM=0 -DMAXOPS=4 -DMAXRUNS=3|three runs, four operations, start-up re-logs"
    "anybar|-DANYBAR|any segment may be a barrier (log.c past half full)"
    "wal-all2|-DWAL -DALL2=1 -DMAXRUNS=1 -DMAXWB=2|write-ahead log, both clients write and trim"
    "wal-emerg|-DWAL -DEMERG_FULL -DALL2=1 -DMAXRUNS=1 -DMAXWB=2|write-ahead log, emergency barriers in a full log"
    "wal-rebase|-DWAL -DNPOS=5|write-ahead log, re-log at start-up after the redo"
    "wal-any|-DWAL -DWAL_ANYCKPT -DWAL_CKPT_CONCURRENT|write-ahead log, checkpoints at any time, the writer going on"
    "wal-runs3|-DWAL -DMAXRUNS=3|write-ahead log, three runs (a crash during the redo, and again)"
    "wal-drop|-DWAL -DWAL_DROP|write-ahead log, the redo drops revoked blocks, no flusher commit"
    "heal-ops3|-DHEAL -DMAXFAIL=2 -DMAXRUNS=1|failed mirrors heal, three operations (trims that never reach them)"
    "bfail-runs2|-DBFAIL|failing backend flushes over two runs"
    "pipe2-main|-DINFLIGHT=2|two barriers in flight, the default bounds"
    "pipe3-main|-DINFLIGHT=3|three barriers in flight, the default bounds"
    "pipe2-wal|-DWAL -DINFLIGHT=2|write-ahead log, two barriers in flight"
    "pipe2-heal|-DHEAL -DINFLIGHT=2 -DMAXFAIL=2 -DMAXOPS=2 -DMAXRUNS=1|failed mirrors heal, two barriers in flight"
    "pipe2-bfail|-DBFAIL -DINFLIGHT=2 -DMAXRUNS=1|failing backend flushes, two barriers in flight"
    "pipe2-rebase|-DINFLIGHT=2 -DNPOS=5|start-up re-log with two barriers in flight"
  )
fi

# One exhaustive search; prints a summary line, returns 1 on a
# violation or an incomplete search.
verify ()
{
  local name=$1 defs=$2 what=$3 dir=$tmp/$1 e=0
  local errors states trans depth secs mem
  mkdir "$dir"
  cp "$model" "$dir/hhclog.pml"
  ( cd "$dir" && spin -a $defs hhclog.pml >spin.out 2>&1 ) || {
    cat "$dir/spin.out" >&2
    echo "check-model: $name: spin -a failed" >&2
    return 1
  }
  # -DNOREDUCE: every step touches global state, partial order
  # reduction gains nothing, and pan compiles much faster without it.
  # (no -DCOLLAPSE: the state vectors hardly compress, 3 %, and the
  # searches are a fifth faster without it)
  ( cd "$dir" && "$cc" -O0 -w -DSAFETY -DNOREDUCE -DVECTORSZ=2048 \
      -DMEMLIM="$memlim" -o pan pan.c >cc.out 2>&1 ) || {
    cat "$dir/cc.out" >&2
    echo "check-model: $name: compiling pan failed" >&2
    return 1
  }
  # -E: pan's invalid-end-state check is off; the model asserts
  # P4_no_deadlock itself (on timeout in the runs without a crash).
  ( cd "$dir" && timeout 600 ./pan -m100000 -w22 -E >pan.out 2>&1 ) || e=$?
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.out" | tail -1)
  trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$dir/pan.out" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' "$dir/pan.out" | tail -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$dir/pan.out" | tail -1)
  mem=$(sed -n 's/^ *\([0-9.]*\).total actual memory usage.*/\1/p' "$dir/pan.out" | tail -1)
  printf '%-14s %10s states %10s transitions depth %5s %7ss %7sMB  %s\n' \
    "$name" "${states:-?}" "${trans:-?}" "${depth:-?}" "${secs:-?}" "${mem:-?}" "$what"
  if [ "$e" -eq 124 ]; then
    echo "check-model: $name: pan timed out" >&2
    return 1
  fi
  if [ -z "$errors" ] || [ "$errors" -ne 0 ] ||
     grep -q 'max search depth too small\|out of memory\|aborting\|MEMLIM bound\|Search not completed' "$dir/pan.out"; then
    cat "$dir/pan.out" >&2
    if [ -f "$dir/hhclog.pml.trail" ]; then
      echo "---- counterexample ($name) ----" >&2
      ( cd "$dir" && spin -t $defs hhclog.pml 2>&1 | sed -n 's/^ *MSC: /  /p' ) >&2 || true
    fi
    echo "check-model: $name: spin found a violation or did not finish" >&2
    return 1
  fi
  if ! grep -q 'Full statespace search' "$dir/pan.out"; then
    echo "check-model: $name: not a full state-space search" >&2
    return 1
  fi
}

# The searches run two at a time when there are two CPUs (together
# they stay under 1 GB), then the mutants.
ncpu=$(nproc 2>/dev/null || echo 1)
[ "$ncpu" -ge 2 ] && ncpu=2

echo "spin: $(spin -V); pan compiled by $cc"
pids=()
for c in "${configs[@]}"; do
  IFS='|' read -r name defs what <<<"$c"
  while [ "$(jobs -rp | wc -l)" -ge "$ncpu" ]; do
    wait -n || true
  done
  verify "$name" "$defs" "$what" >"$tmp/$name.summary" 2>"$tmp/$name.err" &
  pids+=("$!")
done
status=0
i=0
for c in "${configs[@]}"; do
  IFS='|' read -r name defs what <<<"$c"
  wait "${pids[$i]}" || status=1
  cat "$tmp/$name.summary"
  cat "$tmp/$name.err" >&2
  i=$((i + 1))
done

echo
mutants_status=0
HHC_MODEL_MEMLIM=$memlim "$here/run-mutants" -j "$ncpu" || mutants_status=$?
if [ "$mutants_status" -ne 0 ]; then
  echo "check-model: run-mutants failed (status $mutants_status)" >&2
  status=1
fi
[ "$status" -ne 0 ] || model_record check-model "${checked[@]}"
exit "$status"
