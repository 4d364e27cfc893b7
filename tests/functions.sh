# tests/functions.sh: helpers shared by the tests/test-hhc-*.sh scripts.
#
# Source this after `set -euo pipefail`.  Environment it reads:
#
#   HHC_FILTER        absolute path of the built nbdkit-hhc-filter.so
#   CI                when non-empty, a missing command fails the test
#                     (exit 1) instead of skipping it (exit 77)
#   HHC_TEST_VERBOSE  when non-empty, nbdkit runs with -v
#   HHC_TEST_KEEP     when non-empty, the test directory is kept
#
# Cleanups registered with cleanup_fn run when the shell exits, last
# registered first (like a stack).  A test therefore calls make_tmpdir
# before anything else: the directory is removed last, after every
# nbdkit started later has been stopped and its log printed.
#
# Functions:
#
#   requires CMD...              skip (77) unless every CMD is on PATH
#   cleanup_fn CMD ARGS...       run CMD ARGS... at exit
#   fail MSG...                  print "test: FAIL: MSG" and exit 1
#   make_tmpdir                  create $tmp, removed at exit
#   filter                       print $HHC_FILTER (fail if unusable)
#   poll_until SECS CMD...       run CMD every 0.1 s until it succeeds
#   start_nbdkit -P PIDFILE -U SOCKET ARGS...
#                                start nbdkit in the background, wait
#                                until it serves, stop it at exit
#   stop_nbdkit PIDFILE          SIGTERM, wait for a clean exit
#   kill9_nbdkit PIDFILE         SIGKILL, wait until the PID is gone
#   nbd_uri SOCKET               print nbd+unix:///?socket=SOCKET
#   start_httpd_serve SERVE STATUS [OPTION...]
#                                tests/web/httpd-serve SERVE OPTIONs on the
#                                status file STATUS, in the background;
#                                waits for its port, sets $httpd_port;
#                                stopped at exit
#   stop_httpd_serve             stop it; fail unless it exits 0
#   free_port                    print a TCP port of 127.0.0.1 free now
#   free_ports N                 print N distinct such ports
#   start_gateway BIN CONFIG     run hhc-gateway BIN -c CONFIG in the
#                                background, messages in $tmp/gateway.log
#                                (printed if the test fails); sets
#                                $gw_pid; SIGTERM (then SIGKILL) at exit
#   nbdsh_u SOCKET ARGS...       nbdsh connected to SOCKET
#   qemu_io_u SOCKET ARGS...     qemu-io (raw, no FUA) on SOCKET
#   expect_fail_with REGEX CMD...
#                                CMD must fail, its stderr match REGEX
#   put_x V [EXPECT...]          over $tmp/sock, the block at byte $X
#                                must read one of EXPECT (if given; each
#                                a character repeated, "0": zeros);
#                                write V repeated, FLUSH
#   refused_unchanged REGEX [PARAM...]
#                                nbdkit with "${gw[@]}" PARAM... must
#                                refuse to start (stderr matching REGEX)
#                                and change none of $tmp's cache.img,
#                                *.log and backend.img
#   apply_ops IMAGE OP...        apply qemu-io style ops to a file
#   compare_image EXPECTED ACTUAL
#                                cmp, allowing discarded ranges to
#                                read as zeroes

# Debian's python3 is the one with the nbd module nbdsh needs.
# HHC_TEST_PATH_PREFIX (scripts/check's sanitizer stage) goes first: it
# holds an nbdkit wrapper that preloads ASan/UBSan for the instrumented
# filter and plugin.  /usr/sbin last: cryptsetup lives there, and a
# user's PATH often lacks it.
PATH=${HHC_TEST_PATH_PREFIX:+$HHC_TEST_PATH_PREFIX:}/usr/bin:$PATH:/usr/sbin
export PATH

# The test's name, for messages.
_hhc_name=${0##*/}

# ---------------------------------------------------------------------
# Exit handling.

# Registered cleanups, each a command line quoted for eval.
_hhc_cleanups=()
# The test's exit status while cleanups run (they may read it).
_hhc_status=0

cleanup_fn ()
{
  local cmd
  printf -v cmd '%q ' "$@"
  _hhc_cleanups+=("$cmd")
}

_hhc_run_cleanups ()
{
  _hhc_status=$?
  set +e
  # A closed stdout/stderr (test | head) must not cut the cleanups short.
  trap '' PIPE
  local i
  for (( i = ${#_hhc_cleanups[@]} - 1; i >= 0; i-- )); do
    if ! eval "${_hhc_cleanups[i]}"; then
      echo "$_hhc_name: FAIL: cleanup failed: ${_hhc_cleanups[i]}" >&2
      case $_hhc_status in 0|77) _hhc_status=1 ;; esac
    fi
  done
  exit "$_hhc_status"
}
trap _hhc_run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail ()
{
  echo "$_hhc_name: FAIL: $*" >&2
  exit 1
}

requires ()
{
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 && continue
    if [ -n "${CI:-}" ]; then
      echo "$_hhc_name: FAIL: required command '$c' is missing" \
           "(CI is set, so this is an error, not a skip)" >&2
      exit 1
    fi
    echo "$_hhc_name: SKIP: required command '$c' is missing" >&2
    exit 77
  done
}

# ---------------------------------------------------------------------
# Files.

_hhc_remove_tmpdir ()
{
  if [ -n "${HHC_TEST_KEEP:-}" ]; then
    echo "$_hhc_name: keeping $1" >&2
  else
    rm -rf -- "$1"
  fi
}

make_tmpdir ()
{
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/hhc-${_hhc_name%.sh}.XXXXXX")
  cleanup_fn _hhc_remove_tmpdir "$tmp"
}

filter ()
{
  if [ -z "${HHC_FILTER:-}" ]; then
    fail "HHC_FILTER is not set (it must name the built" \
         "nbdkit-hhc-filter.so; 'make check' sets it)"
  fi
  if [ ! -f "$HHC_FILTER" ]; then
    fail "HHC_FILTER=$HHC_FILTER: no such file (build the filter first)"
  fi
  printf '%s\n' "$HHC_FILTER"
}

poll_until ()
{
  local secs=$1 n
  shift
  for (( n = 0; n < secs * 10; n++ )); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}

# ---------------------------------------------------------------------
# nbdkit processes.

# PID of the nbdkit started with each pidfile.
declare -A _hhc_pid_of=()
# Set for each PID this test started and has not stopped yet.
declare -A _hhc_live=()
# Counter naming the log files.
_hhc_nlogs=0

_hhc_alive ()
{
  kill -0 "$1" 2>/dev/null
}

# Wait up to $2 seconds for PID $1 to be gone; fail if it is not.
_hhc_wait_gone ()
{
  local pid=$1 secs=$2 n
  for (( n = 0; n < secs * 10; n++ )); do
    _hhc_alive "$pid" || return 0
    sleep 0.1
  done
  ! _hhc_alive "$pid"
}

# Reap PID $1 (our child); its exit status goes to $_hhc_reaped.
# (Not in a $(...) subshell: only this shell may wait for it.)
_hhc_reaped=0
_hhc_reap ()
{
  _hhc_reaped=0
  { wait "$1"; } 2>/dev/null || _hhc_reaped=$?
}

_hhc_print_log_if_failed ()
{
  [ "$_hhc_status" -ne 0 ] || return 0
  echo "----- $1 -----" >&2
  cat "$1" >&2 || true
  echo "----- end of $1 -----" >&2
}

# At exit: stop an nbdkit the test left running.
_hhc_kill_at_exit ()
{
  local pid=$1
  [ -n "${_hhc_live[$pid]:-}" ] || return 0
  unset "_hhc_live[$pid]"
  if ! _hhc_alive "$pid"; then
    _hhc_reap "$pid"
    if [ "$_hhc_reaped" -ne 0 ]; then
      echo "$_hhc_name: FAIL: nbdkit $pid exited by itself," \
           "status $_hhc_reaped" >&2
      return 1
    fi
    return 0
  fi
  kill "$pid" 2>/dev/null || true
  if ! _hhc_wait_gone "$pid" 60; then
    echo "$_hhc_name: FAIL: nbdkit $pid ignored SIGTERM for 60 s;" \
         "killing it with SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null || true
    _hhc_wait_gone "$pid" 60 || true
    return 1
  fi
  _hhc_reap "$pid"
  if [ "$_hhc_reaped" -ne 0 ]; then
    echo "$_hhc_name: FAIL: nbdkit $pid exited with status" \
         "$_hhc_reaped on SIGTERM" >&2
    return 1
  fi
}

_hhc_pid_for ()
{
  local pidfile=$1 pid=${_hhc_pid_of[$1]:-}
  if [ -z "$pid" ]; then
    fail "no nbdkit was started by this test with pidfile $pidfile"
  fi
  echo "$pid"
}

free_port ()
{
  free_ports 1
}

# free_ports N: N distinct free TCP ports on 127.0.0.1, on one line
# (held open together while they are picked: two calls of free_port
# can return the same port, and did: a gateway's NBD and metrics
# listeners then fought over it).
free_ports ()
{
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

_hhc_stop_gateway ()
{
  if kill -0 "$gw_pid" 2>/dev/null; then
    kill -TERM "$gw_pid"
    _hhc_wait_gone "$gw_pid" 60 || kill -9 "$gw_pid"
  fi
  wait "$gw_pid" 2>/dev/null || true
}

start_gateway ()
{
  : "${tmp:?start_gateway: call make_tmpdir first}"
  "$1" -c "$2" </dev/null >"$tmp/gateway.log" 2>&1 &
  gw_pid=$!
  cleanup_fn _hhc_print_log_if_failed "$tmp/gateway.log"
  cleanup_fn _hhc_stop_gateway
}

_httpd_pid=
start_httpd_serve ()
{
  : "${tmp:?start_httpd_serve: call make_tmpdir first}"
  local serve=$1 status=$2
  shift 2
  rm -f "$tmp/port"
  "$serve" "$@" "$status" "$tmp/port" </dev/null >"$tmp/serve.log" 2>&1 &
  _httpd_pid=$!
  cleanup_fn stop_httpd_serve
  poll_until 30 _httpd_up || fail "httpd-serve wrote no port within 30 s"
  [ -s "$tmp/port" ] || { cat "$tmp/serve.log" >&2; fail "httpd-serve died"; }
  httpd_port=$(cat "$tmp/port")
}

_httpd_up ()
{
  [ -s "$tmp/port" ] || ! kill -0 "$_httpd_pid" 2>/dev/null
}

stop_httpd_serve ()
{
  [ -n "$_httpd_pid" ] || return 0
  kill "$_httpd_pid" 2>/dev/null || true
  local st=0
  wait "$_httpd_pid" || st=$?
  _httpd_pid=
  [ "$st" -eq 0 ] || fail "httpd-serve exited with status $st"
}

nbd_uri ()
{
  printf 'nbd+unix:///?socket=%s\n' "$1"
}

# The server is ready once it has written its pidfile (it is then
# listening) and completed one handshake (nbdkit accepts connections
# only after every .after_fork has returned).
_hhc_wait_ready ()
{
  local pid=$1 pidfile=$2 sock=$3 n
  for (( n = 0; n < 600; n++ )); do
    _hhc_alive "$pid" || return 1
    if [ -s "$pidfile" ] && [ -S "$sock" ]; then
      timeout 60 nbdinfo --size "$(nbd_uri "$sock")" >/dev/null
      return
    fi
    sleep 0.1
  done
  echo "$_hhc_name: nbdkit $pid not ready after 60 s" >&2
  return 1
}

start_nbdkit ()
{
  local pidfile='' sock='' i pid log
  local -a args=("$@") verbose=()
  for (( i = 0; i < ${#args[@]} - 1; i++ )); do
    case ${args[i]} in
      -P) pidfile=${args[i+1]} ;;
      -U) sock=${args[i+1]} ;;
    esac
  done
  if [ -z "$pidfile" ] || [ -z "$sock" ]; then
    fail "start_nbdkit: -P PIDFILE and -U SOCKET are required"
  fi
  : "${tmp:?start_nbdkit: call make_tmpdir first}"
  [ -z "${HHC_TEST_VERBOSE:-}" ] || verbose=(-v)
  _hhc_nlogs=$(( _hhc_nlogs + 1 ))
  log=$tmp/nbdkit-$_hhc_nlogs.log
  rm -f -- "$pidfile" "$sock"
  echo "nbdkit -f ${verbose[*]} $*" >"$log"
  nbdkit -f --exit-with-parent "${verbose[@]}" "$@" </dev/null >>"$log" 2>&1 &
  pid=$!
  _hhc_live[$pid]=1
  _hhc_pid_of[$pidfile]=$pid
  cleanup_fn _hhc_print_log_if_failed "$log"
  cleanup_fn _hhc_kill_at_exit "$pid"
  if ! _hhc_wait_ready "$pid" "$pidfile" "$sock"; then
    echo "$_hhc_name: nbdkit did not start: nbdkit $*" >&2
    cat "$log" >&2
    if ! _hhc_alive "$pid"; then
      # It exited: that is this call's failure, not a crash at exit.
      unset "_hhc_live[$pid]"
      _hhc_reap "$pid"
    fi
    return 1
  fi
}

stop_nbdkit ()
{
  local pid
  pid=$(_hhc_pid_for "$1") || exit 1
  [ -n "${_hhc_live[$pid]:-}" ] || fail "stop_nbdkit: nbdkit $pid already stopped"
  unset "_hhc_live[$pid]"
  kill "$pid" 2>/dev/null || true
  if ! _hhc_wait_gone "$pid" 60; then
    kill -9 "$pid" 2>/dev/null || true
    fail "nbdkit $pid did not exit within 60 s of SIGTERM"
  fi
  _hhc_reap "$pid"
  [ "$_hhc_reaped" -eq 0 ] ||
    fail "nbdkit $pid exited with status $_hhc_reaped on SIGTERM"
}

kill9_nbdkit ()
{
  local pid
  pid=$(_hhc_pid_for "$1") || exit 1
  [ -n "${_hhc_live[$pid]:-}" ] || fail "kill9_nbdkit: nbdkit $pid already stopped"
  unset "_hhc_live[$pid]"
  kill -9 "$pid" 2>/dev/null || true
  _hhc_wait_gone "$pid" 60 || fail "nbdkit $pid survived SIGKILL for 60 s"
  _hhc_reap "$pid"
}

# ---------------------------------------------------------------------
# Clients.

nbdsh_u ()
{
  local sock=$1
  shift
  nbdsh -u "$(nbd_uri "$sock")" "$@"
}

# -t writeback: qemu-io then sends plain writes (no FUA), so only the
# explicit "flush" makes them durable.
qemu_io_u ()
{
  local sock=$1
  shift
  qemu-io -f raw -t writeback "$(nbd_uri "$sock")" "$@"
}

# The log tests' one block x (byte $X): put_x V [EXPECT...].
put_x ()
{
  local v=$1
  shift
  V=$v E="$*" nbdsh_u "$tmp/sock" -c '
import os
x = int(os.environ["X"])
e = os.environ["E"].split()
if e:
    got = h.pread(4096, x)
    ok = [b"\0" * 4096 if w == "0" else w.encode() * 4096 for w in e]
    assert got in ok, "x reads %r..., not one of %r" % (got[:8], e)
h.pwrite(os.environ["V"].encode() * 4096, x)
h.flush()
'
}

# refused_unchanged REGEX [PARAM...]: the gateway "${gw[@]}" (the
# caller's array) with PARAMs must refuse to start, changing no file.
refused_unchanged ()
{
  local regex=$1
  shift
  (cd "$tmp" && md5sum cache.img ./*.log $(ls backend.img 2>/dev/null) \
    >sums)
  rm -f "$tmp/rsock"
  expect_fail_with "$regex" \
    timeout 60 nbdkit -f -U "$tmp/rsock" "${gw[@]}" "$@"
  (cd "$tmp" && md5sum -c --quiet sums) ||
    fail "a refused start changed a file: $regex"
}

_hhc_nexpect=0

expect_fail_with ()
{
  local regex=$1 out err st=0
  shift
  : "${tmp:?expect_fail_with: call make_tmpdir first}"
  _hhc_nexpect=$(( _hhc_nexpect + 1 ))
  out=$tmp/expect-$_hhc_nexpect.out
  err=$tmp/expect-$_hhc_nexpect.err
  "$@" >"$out" 2>"$err" </dev/null || st=$?
  if [ "$st" -ne 0 ] && grep -Eq -- "$regex" "$err"; then
    return 0
  fi
  {
    echo "$_hhc_name: FAIL: expected failure with stderr matching /$regex/"
    echo "command: $*"
    echo "exit status: $st"
    echo "--- stdout ---"; cat "$out"
    echo "--- stderr ---"; cat "$err"
    echo "---"
  } >&2
  exit 1
}

# ---------------------------------------------------------------------
# Expected images.
#
# apply_ops applies the same qemu-io commands a test sent to the
# gateway to a local copy of the original backend image:
#   write -P PATTERN OFF LEN | write -z [-u] OFF LEN | discard OFF LEN
#   | flush
# Numbers take qemu's suffixes (k, M, G; powers of 1024).  Discarded
# ranges keep their previous bytes in IMAGE and are listed in
# IMAGE.discarded: NBD lets them read back as zeroes instead, so
# compare_image accepts either, byte by byte.

_hhc_ops_py='
import json, os, re, sys

def num(s):
    m = re.fullmatch(r"(\d+)([bkmgt]?)", s, re.I)
    if not m:
        sys.exit("apply_ops: bad number %r" % s)
    return int(m.group(1)) << (10 * "bkmgt".index((m.group(2) or "b").lower()))

def subtract(ranges, off, n):
    out = []
    for a, l in ranges:
        b = a + l
        if b <= off or a >= off + n:
            out.append([a, l])
            continue
        if a < off:
            out.append([a, off - a])
        if b > off + n:
            out.append([off + n, b - off - n])
    return out

img, ops = sys.argv[1], sys.argv[2:]
side = img + ".discarded"
ranges = json.load(open(side)) if os.path.exists(side) else []
size = os.path.getsize(img)
with open(img, "r+b") as f:
    for op in ops:
        w = op.split()
        args = [a for a in w[1:] if not a.startswith("-")]
        flags = [a for a in w[1:] if a.startswith("-")]
        if w[0] == "flush":
            continue
        if "-P" in flags:
            pat = int(args.pop(0), 0)
        if w[0] not in ("write", "discard") or len(args) != 2:
            sys.exit("apply_ops: cannot apply %r" % op)
        off, n = num(args[0]), num(args[1])
        if off + n > size:
            sys.exit("apply_ops: %r goes beyond the image" % op)
        ranges = subtract(ranges, off, n)
        if w[0] == "discard":
            ranges.append([off, n])
            continue
        if "-z" in flags:
            data = bytes(n)
        elif "-P" in flags:
            data = bytes([pat]) * n
        else:
            sys.exit("apply_ops: %r needs -P or -z" % op)
        f.seek(off)
        f.write(data)
json.dump(ranges, open(side, "w"))
'

apply_ops ()
{
  python3 -c "$_hhc_ops_py" "$@"
}

_hhc_fixup_py='
import json, os, shutil, sys

exp, act, fixed = sys.argv[1:4]
shutil.copyfile(exp, fixed)
side = exp + ".discarded"
ranges = json.load(open(side)) if os.path.exists(side) else []
with open(exp, "rb") as e, open(act, "rb") as a, open(fixed, "r+b") as f:
    for off, n in ranges:
        e.seek(off)
        a.seek(off)
        eb, ab = e.read(n), a.read(n)
        for i, (x, y) in enumerate(zip(eb, ab)):
            if y != x and y != 0:
                sys.exit("%s: byte %d (discarded range %d+%d) is 0x%02x,"
                         " expected 0x%02x or 0" % (act, off + i, off, n, y, x))
        f.seek(off)
        f.write(ab)
'

compare_image ()
{
  local exp=$1 act=$2
  python3 -c "$_hhc_fixup_py" "$exp" "$act" "$act.expected" ||
    fail "$act: discarded range holds stale data"
  cmp -- "$act.expected" "$act" || fail "$act differs from $exp"
  rm -f -- "$act.expected"
}

# luks_create PASSFILE IMAGE SIZE: a LUKSv1 image of SIZE payload keyed by
# the passphrase in PASSFILE (aes-xts-plain64, sha256, as qemu-img makes
# them).  cryptsetup, not qemu-img: qemu-img times its PBKDF on the
# thread's CPU clock, which some machines do not keep ("Unable to get
# accurate CPU usage" on every try in one CI run).  A fixed iteration count
# keeps the test fast and the same everywhere; the payload starts at 2 MiB.
luks_create ()
{
  local size
  size=$(numfmt --from=iec -- "$3") || fail "luks_create: bad size $3"
  rm -f -- "$2"
  truncate -s $((size + (2 << 20))) -- "$2" || fail "luks_create: $2"
  cryptsetup luksFormat -q --type luks1 --cipher aes-xts-plain64 \
    --key-size 256 --hash sha256 --pbkdf-force-iterations 1000 \
    --align-payload 4096 --key-file "$1" -- "$2" ||
    fail "cryptsetup could not create the LUKS image $2"
}
