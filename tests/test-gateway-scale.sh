#!/usr/bin/env bash
# hhc-gateway with 16 volumes (file backends, a cache and a log file
# each, mode hhc): volumes added and removed with hhcctl (SIGHUP) while
# 8 others are written and verified.
#
#   - 16 volumes in volumes_dir at start: the time until nbdinfo --list
#     shows all 16 and each answers through the front is printed (not
#     asserted);
#   - a client (Debian's python3 with libnbd's module) writes random
#     64 KiB records with a pattern naming the volume and the write to
#     l0..l7, reads each back at once, and at the end reads every
#     record again: no request fails, no byte differs;
#   - meanwhile, 3 rounds: hhcctl volume remove c0..c7, then add them
#     back; after every step nbdinfo --list shows exactly the expected
#     exports.
# Bounded: the client stops after the rounds (or 120 s); every process
# started here is stopped at exit.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

# nbdsh: libnbd's Python module is there (Debian's python3).
requires nbdkit nbdinfo nbdsh timeout
hhc=$(filter)
make_tmpdir
gateway=$abs_top_builddir/appliance/hhc-gateway
hhcctl=$abs_top_builddir/appliance/hhcctl
[ -x "$gateway" ] && [ -x "$hhcctl" ] || fail "hhc-gateway or hhcctl not built"
dir=$tmp/vol.d
mkdir -m 0750 "$dir" "$tmp/in"

cat >"$tmp/gateway.json" <<EOF
{
  "listen": {"socket": "$tmp/front.sock"},
  "filter": "$hhc", "plugin_dir": "$abs_top_builddir/.libs",
  "run_dir": "$tmp/run", "metrics": false,
  "restart": {"min_ms": 100, "max_ms": 2000},
  "volumes_dir": "$dir",
  "volumes": []
}
EOF
# vol NAME: a file-backed volume in mode hhc with its own cache and log.
vol ()
{
  truncate -s 64M "$tmp/$1.img"
  printf '{"name": "%s", "backend": {"type": "file", "path": "%s/%s.img"},
 "cache": "%s/%s.cache", "cache_size": "16M", "backend_id": "%s",
 "log": "%s/%s.log", "log_size": "32M", "mode": "hhc"}\n' \
    "$1" "$tmp" "$1" "$tmp" "$1" "$1" "$tmp" "$1"
}
load=(l0 l1 l2 l3 l4 l5 l6 l7)
churn=(c0 c1 c2 c3 c4 c5 c6 c7)
for v in "${load[@]}" "${churn[@]}"; do
  vol "$v" >"$tmp/in/$v.json"
  cp "$tmp/in/$v.json" "$dir/$v.json"
done

ctl ()
{
  timeout 120 "$hhcctl" volume "$1" --config "$tmp/gateway.json" "${@:2}"
}
# exports: the export names nbdinfo --list shows, sorted, one line.
exports ()
{
  timeout 60 nbdinfo --list --json "nbd+unix:///?socket=$tmp/front.sock" |
    /usr/bin/python3 -c 'import json, sys
print(" ".join(sorted(e["export-name"] for e in json.load(sys.stdin)["exports"])))'
}
# expect_exports NAME...: nbdinfo --list shows exactly these.
expect_exports ()
{
  local want got
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  want=${want% }
  got=$(exports) || fail "nbdinfo --list failed"
  [ "$got" = "$want" ] || fail "exports: '$got', expected '$want'"
}
all16 ()
{
  [ "$(exports 2>/dev/null)" = \
    "$(printf '%s\n' "${load[@]}" "${churn[@]}" | sort | tr '\n' ' ' | sed 's/ $//')" ]
}

# serves NAME: the volume answers a handshake through the front.
serves ()
{
  timeout 60 nbdinfo --size "nbd+unix:///$1?socket=$tmp/front.sock" \
    >/dev/null 2>&1
}

t0=$(date +%s%N)
start_gateway "$gateway" "$tmp/gateway.json"
poll_until 60 all16 || fail "the 16 volumes were not all listed within 60 s"
for v in "${load[@]}" "${churn[@]}"; do
  poll_until 60 serves "$v" || fail "volume $v does not serve"
done
t1=$(date +%s%N)
echo "16 volumes served $(( (t1 - t0) / 1000000 )) ms after start"

# The client on l0..l7; it stops when $tmp/stop appears (or at 120 s).
client_py='
import os, random, sys, time, nbd
tmp = sys.argv[1]
names = sys.argv[2:]
hs = []
for n in names:
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=%s/front.sock" % (n, tmp))
    hs.append(h)
R = 65536
nrec = hs[0].get_size() // R
written = [dict() for _ in hs]
rng = random.Random(1)
i = 0
deadline = time.monotonic() + 120
def rec(v, k):
    return (b"%s:%08d:" % (names[v].encode(), k)).ljust(32, b".") * (R // 32)
while not os.path.exists(tmp + "/stop") and time.monotonic() < deadline:
    v = i % len(hs)
    slot = rng.randrange(nrec)
    hs[v].pwrite(rec(v, i), slot * R)
    if hs[v].pread(R, slot * R) != rec(v, i):
        sys.exit("%s: record %d reads back wrong" % (names[v], slot))
    written[v][slot] = i
    if i % 64 == 63:
        hs[v].flush()
    i += 1
for v, h in enumerate(hs):
    h.flush()
    for slot, k in written[v].items():
        if h.pread(R, slot * R) != rec(v, k):
            sys.exit("%s: record %d differs at the end" % (names[v], slot))
print("client: %d writes verified on %d volumes" % (i, len(hs)))
'
/usr/bin/python3 -c "$client_py" "$tmp" "${load[@]}" >"$tmp/client.out" 2>&1 &
client=$!
stop_client ()
{
  touch "$tmp/stop"
  wait "$client" 2>/dev/null || true
}
cleanup_fn stop_client

present=("${load[@]}" "${churn[@]}")
for round in 1 2 3; do
  for v in "${churn[@]}"; do
    ctl remove --wait 60 "$v" >/dev/null || fail "round $round: remove $v failed"
    present=($(printf '%s\n' "${present[@]}" | grep -vx "$v"))
    expect_exports "${present[@]}"
  done
  for v in "${churn[@]}"; do
    ctl add --wait 60 "$tmp/in/$v.json" || fail "round $round: add $v failed"
    present+=("$v")
    expect_exports "${present[@]}"
  done
done

touch "$tmp/stop"
st=0
wait "$client" || st=$?
cat "$tmp/client.out"
[ "$st" -eq 0 ] || fail "the client failed (status $st)"
grep -q '^client: [1-9][0-9]* writes verified' "$tmp/client.out" ||
  fail "the client verified nothing"
