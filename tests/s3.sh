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
#                              print "access-key=+... secret-key=+...
#                              region=..." (the secret never appears
#                              on a command line)
#   s3_stats [KEY]             s3server.py's /__stats (JSON), or one key
#   s3_config QUERY            change s3server.py's fault rates at run time
#   s3rver_objects BUCKET PREFIX
#                              the object names s3rver stores, sorted
#   s3_objects PREFIX          the object names under PREFIX of
#                              $s3_bucket, sorted, PREFIX taken off
#                              (s3rver's files, s3server.py's
#                              /__objects, ListObjectsV2 on RGW)
#   s3_curl ARGS...            curl with the SigV4 signature of the
#                              test's keys (given to curl in a file)
#   s3_outage_begin, s3_outage_end
#                              the store stops answering, and comes back:
#                              s3rver is frozen (SIGSTOP) and thawed;
#                              radosgw is stopped and started again
#
# Both start functions set $s3_bucket, the name of the first bucket
# (the BUCKET given, on s3rver and s3server.py).
#
# HHC_S3 chooses the servers: unset or "local" as above; "rgw" uses a
# Ceph RGW started once for many tests by tests/rgw.sh (scripts/check's
# RGW stage, make check-cos-rgw), found through HHC_RGW_DIR and
# HHC_RGW_ENDPOINT, HHC_RGW_REGION, HHC_RGW_ACCESS_KEY,
# HHC_RGW_SECRET_KEY (tests/rgw.sh's four lines).  There start_s3rver
# (one bucket, no TLS) and start_s3server (--bucket B only: no faults)
# make a fresh bucket named B-TEST-PID-RANDOM, so tests sharing the RGW
# do not meet; anything else fails the test.  The test sees $s3_store
# (local or rgw) to leave out what only the local servers can do.
#
# s3rver is installed by scripts/install-deps (npm install --prefix
# tests/.s3rver s3rver@3); without it the test is skipped, or fails
# under CI.

s3_access_key=S3RVER
s3_secret_key=S3RVER
s3_region=us-east-1
s3_store=${HHC_S3:-local}
_s3_kind=
_s3_srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
s3rver_bin=$_s3_srcdir/.s3rver/node_modules/.bin/s3rver

requires curl python3
case $s3_store in
  local) requires node ;;
  rgw)
    [ -n "${HHC_RGW_ENDPOINT:-}" ] && [ -d "${HHC_RGW_DIR:-}" ] ||
      fail "HHC_S3=rgw needs HHC_RGW_DIR and HHC_RGW_ENDPOINT (tests/rgw.sh)"
    s3_access_key=$HHC_RGW_ACCESS_KEY
    s3_secret_key=$HHC_RGW_SECRET_KEY
    s3_region=$HHC_RGW_REGION
    ;;
  *) fail "HHC_S3=$s3_store: use local or rgw" ;;
esac
if [ "$s3_store" = local ] && [ ! -x "$s3rver_bin" ]; then
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
  printf 'access-key=+%s secret-key=+%s region=%s\n' "$tmp/access-key" \
    "$tmp/secret-key" "$s3_region"
}

# A curl config file with the keys, for s3_curl.
_s3_curl_config ()
{
  [ -f "$tmp/s3.curl" ] && return 0
  (umask 077 && printf 'user = "%s:%s"\n' "$s3_access_key" "$s3_secret_key" \
    >"$tmp/s3.curl")
}

s3_curl ()
{
  _s3_curl_config
  curl -s -K "$tmp/s3.curl" --aws-sigv4 "aws:amz:$s3_region:s3" "$@"
}

# _rgw_bucket NAME: make a fresh bucket on RGW, print its name.
_rgw_bucket ()
{
  local name t=${_hhc_name%.sh}
  name=$1-${t#test-cos-}-$$-$RANDOM
  s3_curl -f -o /dev/null -X PUT -H "x-amz-content-sha256: $(printf '' |
    sha256sum | cut -d' ' -f1)" "$s3_endpoint/$name" ||
    fail "RGW: could not create bucket $name"
  printf '%s\n' "$name"
}

# _rgw_use BUCKET...: the test's buckets on the shared RGW.
_rgw_use ()
{
  s3_endpoint=$HHC_RGW_ENDPOINT
  s3_port=${s3_endpoint##*:}
  s3_pid=
  _s3_kind=rgw
  s3_bucket=$(_rgw_bucket "$1")
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
  s3_bucket=
  while [ $# -gt 0 ]; do
    case $1 in
      --key|--cert) opts+=("$1" "$2"); shift 2 ;;
      *) buckets+=(--configure-bucket "$1"); s3_bucket=${s3_bucket:-$1}; shift ;;
    esac
  done
  if [ "$s3_store" = rgw ]; then
    [ ${#opts[@]} -eq 0 ] && [ ${#buckets[@]} -eq 2 ] ||
      fail "start_s3rver: with HHC_S3=rgw, one bucket and no TLS"
    _rgw_use "$s3_bucket"
    return 0
  fi
  _s3_kind=s3rver
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
  if [ "$s3_store" = rgw ]; then
    [ $# -eq 2 ] && [ "$1" = --bucket ] ||
      fail "start_s3server $*: only --bucket B with HHC_S3=rgw"
    _rgw_use "$2"
    return 0
  fi
  _s3_kind=s3server
  s3_bucket=
  [ "${1:-}" != --bucket ] || s3_bucket=$2
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

s3_objects ()
{
  local prefix=$1
  case $_s3_kind in
    s3rver) s3rver_objects "$s3_bucket" "${prefix%/}" ;;
    s3server)
      curl -sf --max-time 10 "$s3_endpoint/__objects/$s3_bucket" |
        python3 -c 'import json, sys
for o in json.load(sys.stdin):
    if o["key"].startswith(sys.argv[1]):
        print(o["key"][len(sys.argv[1]):])' "$prefix" | sort ;;
    rgw) _rgw_list "$prefix" | sed "s|^$prefix||" | sort ;;
  esac
}

# _rgw_list PREFIX: every key under PREFIX (ListObjectsV2, pages).
_rgw_list ()
{
  local token= page query
  while :; do
    # The query by hand, in SigV4's canonical form (curl 7.88's
    # --data-urlencode leaves '/' as it is, and the signature fails).
    query=$(python3 -c 'import sys, urllib.parse as u
q = {"list-type": "2", "prefix": sys.argv[1]}
if sys.argv[2]:
    q["continuation-token"] = sys.argv[2]
print("&".join(k + "=" + u.quote(v, safe="-_.~") for k, v in sorted(q.items())))' \
      "$1" "$token")
    page=$(s3_curl -f -H "x-amz-content-sha256: $(printf '' |
      sha256sum | cut -d' ' -f1)" "$s3_endpoint/$s3_bucket?$query") ||
      fail "RGW: listing $s3_bucket failed"
    token=$(python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.fromstring(sys.argv[1])
ns = {"s": r.tag[1:].split("}")[0]} if r.tag.startswith("{") else {}
p = "s:" if ns else ""
for c in r.findall(p + "Contents", ns):
    print("K " + c.find(p + "Key", ns).text)
t = r.find(p + "NextContinuationToken", ns)
if t is not None and r.find(p + "IsTruncated", ns).text == "true":
    print("T " + t.text)' "$page")
    printf '%s\n' "$token" | sed -n 's/^K //p'
    token=$(printf '%s\n' "$token" | sed -n 's/^T //p')
    [ -n "$token" ] || return 0
  done
}

_s3_outage=

s3_outage_begin ()
{
  _s3_outage=1
  cleanup_fn s3_outage_end
  case $_s3_kind in
    s3rver|s3server) kill -STOP "$s3_pid" ;;
    rgw) "$_s3_srcdir/rgw.sh" stop-rgw "$HHC_RGW_DIR" ||
           fail "tests/rgw.sh stop-rgw failed" ;;
  esac
}

# Idempotent (also a cleanup: the store must answer for nbdkit to stop).
s3_outage_end ()
{
  [ -n "$_s3_outage" ] || return 0
  _s3_outage=
  case $_s3_kind in
    s3rver|s3server) kill -CONT "$s3_pid" ;;
    rgw) "$_s3_srcdir/rgw.sh" start-rgw "$HHC_RGW_DIR" ||
           fail "tests/rgw.sh start-rgw failed" ;;
  esac
}
