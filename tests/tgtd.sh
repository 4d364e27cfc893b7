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
    tgt_port=$(( 20000 + RANDOM % 20000 ))
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
