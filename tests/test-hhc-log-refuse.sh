#!/usr/bin/env bash
# Mode hhc: start-up refuses a log it must not use, and touches nothing.
#
# Log L1 is written with cache C1, log L2 with cache C2 (same backend).
# Each of these starts must fail with a one-line error on stderr that
# names the problem (and the log), leaving the log files' bytes (and
# the cache files') unchanged:
#   - L1 with cache C2 (L1 belongs to another cache)
#   - L1 for another backend (backend-id differs), with a new cache
#   - L1 and L2 as mirrors of one log (they are different logs)
#   - mode=hhc without log=
#   - mode=wb on C1 (used in mode hhc) without its log, with another
#     cache's log, and on a new cache with a log (it would have to be
#     replayed)
#   - log-size= below 8M;  an existing 1 MiB log file (too small)
# Afterwards C1 + L1 and C2 + L2 still start and serve their data.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdsh qemu-io md5sum
hhc=$(filter)
make_tmpdir

truncate -s 16M "$tmp/backend.img"
head -c 1M /dev/urandom >"$tmp/small.log"

# gw_args CACHE [ARGS...]: set gw, the gateway on the common backend.
gw_args ()
{
  local c=$1
  shift
  gw=(--filter="$hhc" file "$tmp/backend.img" cache="$tmp/$c"
      backend-id="${id:-refuse-test}" dirty-low=90 dirty-high=95 "$@")
}

# C1 + L1, C2 + L2: each with a dirty block in its cache and its log.
gw_args c1.img cache-size=16M log="$tmp/l1.log" log-size=16M
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
qemu_io_u "$tmp/sock" -c 'write -P 0x11 1M 64k' -c flush >/dev/null
stop_nbdkit "$tmp/pid"
gw_args c2.img cache-size=16M log="$tmp/l2.log" log-size=16M
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
qemu_io_u "$tmp/sock" -c 'write -P 0x22 2M 64k' -c flush >/dev/null
stop_nbdkit "$tmp/pid"

sums ()
{
  (cd "$tmp" && md5sum c1.img c2.img l1.log l2.log small.log)
}
sums >"$tmp/sums.before"

# refused REGEX GATEWAY-ARGS...: nbdkit must exit non-zero with exactly
# one line on stderr, matching REGEX; the files must be unchanged.
nrefused=0
refused ()
{
  local regex=$1 err st=0
  shift
  nrefused=$((nrefused + 1))
  err=$tmp/refused-$nrefused.err
  rm -f -- "$tmp/rsock"
  timeout 60 nbdkit -f -U "$tmp/rsock" "$@" </dev/null >"$err.out" 2>"$err" ||
    st=$?
  if [ "$st" -eq 0 ] || [ "$st" -eq 124 ] || ! grep -Eq -- "$regex" "$err" ||
     [ "$(wc -l <"$err")" -ne 1 ]; then
    echo "--- stderr ---" >&2
    cat "$err" >&2
    fail "expected exit status 1 and one line matching /$regex/," \
         "got status $st: nbdkit $*"
  fi
  sums | diff "$tmp/sums.before" - >&2 ||
    fail "a refused start changed a cache or log file: nbdkit $*"
  echo "refused: $(cat "$err")"
}

gw_args c2.img log="$tmp/l1.log"
refused "log .*l1\.log belongs to another cache" "${gw[@]}"

id=another-backend gw_args c3.img cache-size=16M log="$tmp/l1.log"
refused "log .*l1\.log belongs to another volume" "${gw[@]}"

gw_args c1.img log="$tmp/l1.log" log="$tmp/l2.log"
refused "l1\.log and .*l2\.log belong to different logs" "${gw[@]}"

gw_args c1.img mode=hhc
refused "mode=hhc needs a log" "${gw[@]}"

gw_args c1.img mode=wb
refused "c1\.img: the cache was used in mode hhc .*give that log as log=" \
  "${gw[@]}"

gw_args c1.img mode=wbflush log="$tmp/l2.log"
refused "log .*l2\.log belongs to another cache" "${gw[@]}"

gw_args c3.img cache-size=16M mode=wb log="$tmp/l1.log"
refused "c3\.img: the cache is new, so log= would have to be replayed" \
  "${gw[@]}"

gw_args c3.img cache-size=16M log="$tmp/new.log" log-size=4M
refused "log-size=4M: must be at least 8M" "${gw[@]}"
[ ! -e "$tmp/new.log" ] || fail "a refused log-size=4M created the log"

gw_args c3.img cache-size=16M log="$tmp/small.log"
refused "small\.log.*too small" "${gw[@]}"

gw_args c3.img cache-size=16M log="$tmp/small.log" log-size=16M
refused "small\.log.*(too )?small" "${gw[@]}"

# The right pairs still work, with their own data.
gw_args c1.img log="$tmp/l1.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c 'assert h.pread(65536, 1 << 20) == b"\x11" * 65536'
stop_nbdkit "$tmp/pid"
gw_args c2.img log="$tmp/l2.log"
start_nbdkit -P "$tmp/pid" -U "$tmp/sock" "${gw[@]}"
nbdsh_u "$tmp/sock" -c 'assert h.pread(65536, 2 << 20) == b"\x22" * 65536'
stop_nbdkit "$tmp/pid"
