#!/usr/bin/env bash
# tests/model/check-commit.sh: model-check the one-sync cache commit
# (a design, tests/model/hhccommit.pml; README.md "The one-sync cache
# commit") with spin, exhaustively: the design must hold in every
# baseline row (named none...), and each mutant row (one rule of the
# design undone, -DMUT_...) must give a counterexample.  Prints a
# table; exits 0 if every row is as expected, 1 if not.
#
# Usage: check-commit.sh [-j JOBS] [-v] [-k DIR] [NAME...]
#   -j JOBS  run this many searches at once (default: 2 on two or more
#            CPUs, else 1)
#   -v       print the steps (MSC lines) of each counterexample
#   -k DIR   keep each run's files (pan.c, pan.out, the trail) in DIR
#   NAME     run only these rows (e.g. none MUT_NO_ERASE)
#
# Needs spin and a C compiler (HHC_MODEL_CC, default clang if
# installed, else cc); without spin it is skipped (exit 77), or fails
# when CI is set.  HHC_MODEL_FULL=1 adds the deep row (none-w4, minutes).
# HHC_MODEL_TIMEOUT: seconds per search (default 300);
# HHC_MODEL_MEMLIM: MB per search (default 1000; a search that reaches
# it fails).
set -euo pipefail
source "$(dirname "$0")/../functions.sh"

cc=${HHC_MODEL_CC:-$(command -v clang >/dev/null 2>&1 && echo clang || echo cc)}
limit=${HHC_MODEL_TIMEOUT:-300}
memlim=${HHC_MODEL_MEMLIM:-1000}
jobs_max=$(nproc 2>/dev/null || echo 1)
[ "$jobs_max" -ge 2 ] && jobs_max=2
verbose=
keep=
while getopts j:vk: opt; do
  case $opt in
    j) jobs_max=$OPTARG ;;
    v) verbose=1 ;;
    k) keep=$OPTARG ;;
    *) echo "usage: check-commit.sh [-j JOBS] [-v] [-k DIR] [NAME...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

requires spin "$cc" timeout
here=$(cd "$(dirname "$0")" && pwd)
model=$here/hhccommit.pml
source "$here/sums.sh"
checked=("$model" "$here/check-commit.sh" "$here/sums.sh")
if [ $# -eq 0 ] && model_unchanged check-commit "${checked[@]}"; then
  echo "check-commit: hhccommit.pml and check-commit.sh are as last" \
    "checked in full (checked.sha256): not run again" \
    "(HHC_MODEL_ALWAYS=1 runs them)"
  exit 0
fi
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  make_tmpdir
  work=$tmp
fi

# name | what | spin -D options beyond the row's own -DMUT_... (the
# model's defaults: MAXW=3 writes, MAXCOMMIT=4 commits, MAXCRASH=2
# crashes, 2 blocks, 4 slots, 2 pages of EPP=2 entries).  A row named
# none... is a baseline: no -D of its name, no error.
rows=(
  "none|the design, with the two rules spin added (must give no error)|"
  "none-epp1|the design, 4 pages of 1 entry (must give no error)|-DEPP=1"
  "MUT_INPLACE_FRESH|rule 1: no copy-on-write window, fresh slots rewritten in place|"
  "MUT_WINDOW_AT_SYNC|rule 5: the window opens at the commit's sync, not at its snapshot|"
  "MUT_NO_HOLD|rule 5: an in-place write does not hold off the snapshot of its page|"
  "MUT_EMPTY_CLOSES|window: a commit that wrote no page (a sync only) closes it|"
  "MUT_PER_PAGE|rule 2: no page count, each page's newest valid copy on its own|"
  "MUT_NO_ERASE|rule 6: the torn group rolled back in memory, not erased on disk|"
  "MUT_REUSE_EARLY|rule 3: slots freed by N reusable before N's sync returns|"
  "MUT_CHECK_ALL|rule 4: the load checks every entry's checksum, not only fresh ones|"
  "MUT_LOAD_NO_WINDOW|added rule A: the load does not reopen the window (as briefed)|"
  "MUT_SNAP_PER_PAGE|added rule B: dirty list at the start, one snapshot step per page (as briefed, as C)|"
)
# The deep row: 2 million states, 150 s of CI's 2 cores for a design
# not built yet (make check runs the rows above, ~25 s); also when named.
if [ -n "${HHC_MODEL_FULL:-}" ] || [[ " $* " == *" none-w4 "* ]]; then
  rows+=(
    "none-w4|the design, 4 writes, 3 commits (must give no error)|-DMAXW=4 -DMAXCOMMIT=3"
  )
fi

selected=()
for r in "${rows[@]}"; do
  name=${r%%|*}
  if [ $# -eq 0 ]; then
    selected+=("$r")
  else
    for want in "$@"; do
      [ "$want" = "$name" ] && selected+=("$r")
    done
  fi
done
if [ ${#selected[@]} -eq 0 ]; then
  echo "check-commit: no such row: $*" >&2
  exit 2
fi

# One search: spin -a, compile, run; the result goes to $dir/result as
# "errors states transitions depth seconds MB first-violation".
search ()
{
  local name=$1 defs=$2 dir=$work/$1 e
  mkdir -p "$dir"
  cd "$dir"
  cp "$model" hhccommit.pml
  if ! spin -a $defs hhccommit.pml >spin.out 2>&1; then
    echo "ERR spin -a failed (see $dir/spin.out)" >result
    return
  fi
  # -DNOREDUCE: every step touches global state (one process), partial
  # order reduction gains nothing.
  if ! "$cc" -O0 -w -DSAFETY -DNOREDUCE -DVECTORSZ=1024 \
       -DMEMLIM="$memlim" -o pan pan.c >cc.out 2>&1; then
    echo "ERR compiling pan failed (see $dir/cc.out)" >result
    return
  fi
  # -E: no end-state check (the model stops when its bounds run out)
  e=0
  timeout "$limit" ./pan -m100000 -w22 -E >pan.out 2>&1 || e=$?
  if [ "$e" -eq 124 ]; then
    echo "ERR timed out after ${limit}s" >result
    return
  fi
  local errors states trans depth secs mem why
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | tail -1)
  trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' pan.out | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' pan.out | tail -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' pan.out | tail -1)
  mem=$(sed -n 's/^ *\([0-9.]*\).total actual memory usage.*/\1/p' pan.out | tail -1)
  # the property: the name or-ed into the failed assertion
  why=$(sed -n 's/^pan:1: assertion violated (*\([A-Z][A-Za-z0-9]*_[A-Za-z0-9_]*\).*/\1/p' pan.out | head -1)
  [ -n "$why" ] || why=$(sed -n 's/^pan:1: \(.*\) (at depth.*/\1/p' pan.out | head -1 | tr ' ' '_')
  if [ -z "$errors" ]; then
    echo "ERR no result from pan (see $dir/pan.out)" >result
    return
  fi
  # (pan also says "Search not completed" when it stops at an error)
  if grep -q 'max search depth too small\|out of memory\|aborting' pan.out ||
     { [ "$errors" -eq 0 ] &&
       { grep -q 'MEMLIM bound\|Search not completed' pan.out ||
         ! grep -q 'Full statespace search' pan.out; }; }; then
    echo "ERR incomplete search (see $dir/pan.out)" >result
    return
  fi
  echo "$errors ${states:-?} ${trans:-?} ${depth:-?} ${secs:-?} ${mem:-?} $why" >result
  if [ "$errors" -gt 0 ] && [ -f hhccommit.pml.trail ]; then
    spin -t $defs hhccommit.pml 2>&1 | sed -n 's/^ *MSC: /  /p' >trail.txt || true
  fi
}

echo "spin: $(spin -V); pan compiled by $cc"
for r in "${selected[@]}"; do
  name=${r%%|*}
  rest=${r#*|}
  extra=${rest#*|}
  defs=$extra
  case $name in none*) ;; *) defs="-D$name $extra" ;; esac
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
    wait -n || true
  done
  ( search "$name" "$defs" ) &
done
wait

status=0
printf '%-19s %-6s %-6s %9s %10s %5s %7s %7s  %s\n' \
  row expect errors states transitions depth seconds MB result
for r in "${selected[@]}"; do
  name=${r%%|*}
  rest=${r#*|}
  what=${rest%%|*}
  errors=ERR states= trans= depth= secs= mem= why=
  read -r errors states trans depth secs mem why <"$work/$name/result" || true
  case $name in none*) base=1 ;; *) base= ;; esac
  if [ -n "$base" ]; then expect=0; else expect='>0'; fi
  if [ "$errors" = ERR ]; then
    result="FAIL: $states $trans $depth $secs $mem $why"
    states= trans= depth= secs= mem=
    status=1
  elif [ -n "$base" ] && [ "$errors" -eq 0 ]; then
    result=ok
  elif [ -z "$base" ] && [ "$errors" -gt 0 ]; then
    result="caught: ${why:-?}"
  else
    result=FAIL
    status=1
  fi
  printf '%-19s %-6s %-6s %9s %10s %5s %7s %7s  %s\n' \
    "$name" "$expect" "$errors" "$states" "$trans" "$depth" "$secs" "$mem" "$result"
  printf '%-19s   %s\n' '' "$what"
  if [ -s "$work/$name/trail.txt" ] && { [ -n "$verbose" ] || [ -n "$base" ]; }; then
    cat "$work/$name/trail.txt"
  fi
done
[ "$status" -ne 0 ] || [ ${#selected[@]} -ne ${#rows[@]} ] ||
  model_record check-commit "${checked[@]}"
exit $status
