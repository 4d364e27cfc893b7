# tests/tgtd.sh: a private tgtd iSCSI target for one test.
#
# Source after tests/functions.sh and make_tmpdir.  Functions:
#
#   start_tgtd                 start tgtd -f on 127.0.0.1 with a port and
#                              a control port of its own; sets
#                              $tgt_port, $tgt_portal; stopped at exit
#   tgtadm_ ARGS...            tgtadm --lld iscsi on this tgtd
#   add_lun IQN FILE [PARAMS]  target tid 1 + LUN 1 backed by FILE
#                              (tgtadm --params PARAMS), open to all;
#                              waits until iscsi-inq answers
#   tgt_url [LUN]              iscsi://127.0.0.1:PORT/$tgt_iqn/LUN
#   tgt_lun_reset [LUN]        send a LOGICAL UNIT RESET to LUN (default 1)
#                              from an initiator of its own (libiscsi
#                              through python3's ctypes): tgtd then
#                              reports UNIT ATTENTION 29h/00h on the
#                              next command of every session

requires tgtd tgtadm iscsi-inq

# Is TCP port $1 on 127.0.0.1 free?  (Nothing listening on it.)
_tgt_port_free ()
{
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

tgtadm_ ()
{
  tgtadm -C "$tgt_ctl" --lld iscsi "$@"
}

_tgt_stop ()
{
  local pid=$1
  _hhc_alive "$pid" || return 0
  tgtadm_ --op update --mode sys --name State -v offline >/dev/null 2>&1
  tgtadm_ --op delete --mode target --tid 1 --force >/dev/null 2>&1
  tgtadm_ --op delete --mode system >/dev/null 2>&1
  _hhc_wait_gone "$pid" 10 && return 0
  kill "$pid" 2>/dev/null
  _hhc_wait_gone "$pid" 10 && return 0
  kill -9 "$pid" 2>/dev/null
  _hhc_wait_gone "$pid" 10
}

start_tgtd ()
{
  local n
  : "${tmp:?start_tgtd: call make_tmpdir first}"
  for (( n = 0; n < 50; n++ )); do
    # Below 32768, where the ephemeral ports start (tests/s3.sh).
    tgt_port=$(( 20000 + RANDOM % 12000 ))
    _tgt_port_free "$tgt_port" || continue
    # tgtd's control channel is a unix socket named after this number.
    tgt_ctl=$(( 1000 + RANDOM % 30000 ))
    [ -e "/var/run/tgtd/socket.$tgt_ctl" ] && continue
    break
  done
  tgt_portal=127.0.0.1:$tgt_port
  tgtd -f -C "$tgt_ctl" --iscsi "portal=$tgt_portal" \
    </dev/null >"$tmp/tgtd.log" 2>&1 &
  tgt_pid=$!
  cleanup_fn _hhc_print_log_if_failed "$tmp/tgtd.log"
  cleanup_fn _tgt_stop "$tgt_pid"
  poll_until 20 tgtadm_ --op show --mode sys >/dev/null 2>&1 ||
    fail "tgtd did not start (see $tmp/tgtd.log)"
}

tgt_url ()
{
  printf 'iscsi://%s/%s/%s\n' "$tgt_portal" "$tgt_iqn" "${1:-1}"
}

add_lun ()
{
  tgt_iqn=$1
  local file=$2 params=${3:-}
  tgtadm_ --op new --mode target --tid 1 -T "$tgt_iqn"
  # ${tgt_blocksize}: a logical block size other than 512.
  tgtadm_ --op new --mode logicalunit --tid 1 --lun 1 -b "$file" \
    ${tgt_blocksize:+--blocksize="$tgt_blocksize"}
  # Parameters such as thin_provisioning=1 are set with an update.
  [ -z "$params" ] ||
    tgtadm_ --op update --mode logicalunit --tid 1 --lun 1 --params "$params"
  tgtadm_ --op bind --mode target --tid 1 -I ALL
  poll_until 20 iscsi-inq "$(tgt_url 1)" >/dev/null 2>&1 ||
    fail "iscsi-inq does not answer on $(tgt_url 1)"
}

plugin ()
{
  [ -f "${HHC_ISCSI_PLUGIN:-}" ] ||
    fail "HHC_ISCSI_PLUGIN=${HHC_ISCSI_PLUGIN:-}: not built"
  printf '%s\n' "$HHC_ISCSI_PLUGIN"
}

# A LOGICAL UNIT RESET task management function, sent by a separate
# initiator that logs in (its own login's UNIT ATTENTION is consumed by
# libiscsi's connect), resets the LU and logs out; 10 s per command,
# 30 s in all.
_tgt_lun_reset_py='
import ctypes, ctypes.util, sys
portal, iqn, lun = sys.argv[1].encode(), sys.argv[2].encode(), int(sys.argv[3])
lib = ctypes.CDLL(ctypes.util.find_library("iscsi") or "libiscsi.so.7")
P = ctypes.c_void_p
lib.iscsi_create_context.restype = P
lib.iscsi_create_context.argtypes = [ctypes.c_char_p]
lib.iscsi_get_error.restype = ctypes.c_char_p
lib.iscsi_get_error.argtypes = [P]
for f, a in (("iscsi_set_targetname", [P, ctypes.c_char_p]),
             ("iscsi_set_session_type", [P, ctypes.c_int]),
             ("iscsi_set_timeout", [P, ctypes.c_int]),
             ("iscsi_full_connect_sync", [P, ctypes.c_char_p, ctypes.c_int]),
             ("iscsi_task_mgmt_lun_reset_sync", [P, ctypes.c_uint32]),
             ("iscsi_logout_sync", [P]),
             ("iscsi_destroy_context", [P])):
    getattr(lib, f).argtypes = a
ctx = lib.iscsi_create_context(b"iqn.2026-01.test:lun-resetter")
lib.iscsi_set_targetname(ctx, iqn)
lib.iscsi_set_session_type(ctx, 2)  # ISCSI_SESSION_NORMAL
lib.iscsi_set_timeout(ctx, 10)
if lib.iscsi_full_connect_sync(ctx, portal, lun) != 0:
    sys.exit("login: %s" % lib.iscsi_get_error(ctx).decode())
if lib.iscsi_task_mgmt_lun_reset_sync(ctx, lun) != 0:
    sys.exit("LOGICAL UNIT RESET: %s" % lib.iscsi_get_error(ctx).decode())
lib.iscsi_logout_sync(ctx)
lib.iscsi_destroy_context(ctx)
'

tgt_lun_reset ()
{
  timeout 30 python3 -c "$_tgt_lun_reset_py" "$tgt_portal" "$tgt_iqn" \
    "${1:-1}" || fail "LOGICAL UNIT RESET of LUN ${1:-1} failed"
}
