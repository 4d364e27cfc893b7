# tests/s3.sh: S3 servers for the cos plugin's tests.
#
# Source after tests/functions.sh and make_tmpdir.  Functions:
#
#   cos_plugin                 print $HHC_COS_PLUGIN (fail if not built)
#   start_s3rver [--key K --cert C] BUCKET...
#                              start s3rver (npm, tests/.s3rver) on
#                              127.0.0.1 with a port of its own and the
#                              buckets made (https with --key/--cert);
#                              sets $s3_port, $s3_endpoint,
#                              $s3_data (its directory); stopped at exit
#   start_s3server ARGS...     start tests/s3server.py, the project's
#                              signature-verifying server (ARGS: its
#                              options, e.g. --bucket B --fault-503 0.1);
#                              sets $s3_port, $s3_endpoint; stopped at exit
#   s3_creds                   write the key id and secret to
#                              $tmp/access-key and $tmp/secret-key and
#                              print "access-key=+... secret-key=+..."
#                              (the secret never appears on a command line)
#   s3_stats [KEY]             s3server.py's /__stats (JSON), or one key
#   s3_config QUERY            change s3server.py's fault rates at run time
#   s3rver_objects BUCKET PREFIX
#                              the object names s3rver stores, sorted
#
# s3rver is installed by scripts/install-deps (npm install --prefix
# tests/.s3rver s3rver@3); without it the test is skipped, or fails
# under CI.

s3_access_key=S3RVER
s3_secret_key=S3RVER
_s3_srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
s3rver_bin=$_s3_srcdir/.s3rver/node_modules/.bin/s3rver

requires node curl python3
if [ ! -x "$s3rver_bin" ]; then
  if [ -n "${CI:-}" ]; then
    fail "s3rver is not installed in tests/.s3rver (scripts/install-deps does it)"
  fi
  echo "$_hhc_name: SKIP: s3rver is not installed in tests/.s3rver" \
       "(run scripts/install-deps)" >&2
  exit 77
fi

cos_plugin ()
{
  [ -f "${HHC_COS_PLUGIN:-}" ] ||
    fail "HHC_COS_PLUGIN=${HHC_COS_PLUGIN:-}: not built"
  printf '%s\n' "$HHC_COS_PLUGIN"
}

s3_creds ()
{
  printf '%s' "$s3_access_key" >"$tmp/access-key"
  printf '%s' "$s3_secret_key" >"$tmp/secret-key"
  chmod 600 "$tmp/access-key" "$tmp/secret-key"
  printf 'access-key=+%s secret-key=+%s\n' "$tmp/access-key" \
    "$tmp/secret-key"
}

_s3_port_free ()
{
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Does anything answer HTTP on $s3_port?
_s3_answers ()
{
  curl -s -k -o /dev/null --max-time 2 "$s3_endpoint/"
}

# s3rver answers, or has exited.
_s3_up_or_gone ()
{
  _s3_answers || ! _hhc_alive "$s3_pid"
}

# SIGTERM, then SIGKILL, of a server this test started.
_s3_stop ()
{
  local pid=$1
  _hhc_alive "$pid" || return 0
  kill "$pid" 2>/dev/null
  _hhc_wait_gone "$pid" 10 && return 0
  kill -9 "$pid" 2>/dev/null
  _hhc_wait_gone "$pid" 10
}

start_s3rver ()
{
  local n attempt
  local -a buckets=() opts=()
  : "${tmp:?start_s3rver: call make_tmpdir first}"
  while [ $# -gt 0 ]; do
    case $1 in
      --key|--cert) opts+=("$1" "$2"); shift 2 ;;
      *) buckets+=(--configure-bucket "$1"); shift ;;
    esac
  done
  s3_data=$tmp/s3rver
  mkdir -p "$s3_data"
  # s3rver makes ListObjectsV2's continuation tokens with DES, which
  # OpenSSL 3 keeps in its legacy provider: without it every truncated
  # listing is a 500.
  local node_opts=${NODE_OPTIONS:-}
  if node --openssl-legacy-provider -e 0 2>/dev/null; then
    node_opts="$node_opts --openssl-legacy-provider"
  fi
  cleanup_fn _hhc_print_log_if_failed "$tmp/s3rver.log"
  # A port that was free when picked may be taken before s3rver binds
  # it (another test's server, or an outgoing connection): then s3rver
  # exits with EADDRINUSE, and another port is tried.  Ports below
  # 32768, the start of Linux's ephemeral range.
  for (( attempt = 1; attempt <= 5; attempt++ )); do
    for (( n = 0; n < 50; n++ )); do
      s3_port=$(( 20000 + RANDOM % 12000 ))
      _s3_port_free "$s3_port" && break
    done
    NODE_OPTIONS=$node_opts node "$s3rver_bin" -d "$s3_data" -a 127.0.0.1 -p "$s3_port" \
      --silent "${opts[@]}" "${buckets[@]}" </dev/null >"$tmp/s3rver.log" 2>&1 &
    s3_pid=$!
    s3_endpoint=http://127.0.0.1:$s3_port
    [ ${#opts[@]} -eq 0 ] || s3_endpoint=https://127.0.0.1:$s3_port
    cleanup_fn _s3_stop "$s3_pid"
    poll_until 30 _s3_up_or_gone && _s3_answers && return 0
    grep -q EADDRINUSE "$tmp/s3rver.log" || break
  done
  fail "s3rver did not start on port $s3_port (see $tmp/s3rver.log)"
}

start_s3server ()
{
  : "${tmp:?start_s3server: call make_tmpdir first}"
  rm -f "$tmp/s3server.port"
  python3 "$_s3_srcdir/s3server.py" --port-file "$tmp/s3server.port" \
    --access-key "$s3_access_key" --secret-key "$s3_secret_key" "$@" \
    </dev/null >"$tmp/s3server.log" 2>&1 &
  s3_pid=$!
  cleanup_fn _hhc_print_log_if_failed "$tmp/s3server.log"
  cleanup_fn _s3_stop "$s3_pid"
  poll_until 30 test -s "$tmp/s3server.port" ||
    fail "s3server.py did not start (see $tmp/s3server.log)"
  s3_port=$(cat "$tmp/s3server.port")
  s3_endpoint=http://127.0.0.1:$s3_port
}

s3_stats ()
{
  local json
  json=$(curl -sf --max-time 10 "$s3_endpoint/__stats") ||
    fail "s3server.py: GET /__stats failed"
  if [ $# -eq 0 ]; then
    printf '%s\n' "$json"
  else
    python3 -c 'import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    v = v[k]
print(v)' "$json" "$1"
  fi
}

s3_config ()
{
  curl -sf --max-time 10 -X PUT "$s3_endpoint/__config?$1" >/dev/null ||
    fail "s3server.py: PUT /__config?$1 failed"
}

s3rver_objects ()
{
  local dir=$s3_data/$1/$2
  [ -d "$dir" ] || return 0
  find "$dir" -maxdepth 1 -name '*._S3rver_object' -printf '%f\n' |
    sed 's/\._S3rver_object$//' | sort
}
