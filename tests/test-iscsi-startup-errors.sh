#!/usr/bin/env bash
# hhciscsi: a wrong target IQN, a wrong LUN, an unreachable portal, a
# portal that never answers or a wrong CHAP secret stops nbdkit at
# start-up, non-zero, with one clear error line (and the secret appears
# nowhere in the output).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit python3
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 8M "$tmp/lun.img"
add_lun iqn.2026-01.test:errors "$tmp/lun.img"

# Without --run: nbdkit -f must itself exit non-zero.  (With --run,
# nbdkit 1.32 exits 0 after a failing .after_fork.)
run () { rm -f "$tmp/e.sock"; timeout -k 10 60 nbdkit -f -U "$tmp/e.sock" "$plugin" "$@" timeout=5; }

expect_fail_with 'error: .*cannot log in to iqn.2026-01.test:nosuch' \
  run "iscsi://$tgt_portal/iqn.2026-01.test:nosuch/1"
expect_fail_with 'error: .*LUN 7: .*(NOT_SUPPORTED|not supported)' \
  run "$(tgt_url 7)"

# A port that nothing listens on.
closed=$tgt_port
while ! _tgt_port_free "$closed"; do closed=$(( closed + 1 )); done
expect_fail_with "error: .*127.0.0.1:$closed" \
  run "iscsi://127.0.0.1:$closed/$tgt_iqn/1"

# A portal that accepts the connection and never answers (a target
# that hangs), with the default timeout=0: the login gives up after its
# bound and nbdkit exits with one error; it used to wait for ever.
python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
conns = []
end = time.time() + 300
s.settimeout(1)
while time.time() < end:
    try:
        conns.append(s.accept()[0])
    except socket.timeout:
        pass
' "$tmp/silent.port" &
silent_pid=$!
stop_silent () { kill "$silent_pid" 2>/dev/null; wait "$silent_pid" 2>/dev/null; return 0; }
cleanup_fn stop_silent
poll_until 20 test -s "$tmp/silent.port" || fail "the silent listener did not start"
silent=$(cat "$tmp/silent.port")
rm -f "$tmp/e.sock"
st=0
timeout -k 10 60 nbdkit -f -U "$tmp/e.sock" "$plugin" \
  "iscsi://127.0.0.1:$silent/$tgt_iqn/1" 2>"$tmp/expect-silent.err" || st=$?
# 124 (137 after -k): timeout ended it (and its SIGTERM made the login
# fail, so the error line alone proves nothing).
[ "$st" -ne 124 ] && [ "$st" -ne 137 ] ||
  fail "nbdkit still waited for the silent portal after 60 s"
[ "$st" -ne 0 ] || fail "nbdkit started against a portal that never answers"
grep -Eq "error: .*cannot log in to $tgt_iqn on portal 127.0.0.1:$silent" \
  "$tmp/expect-silent.err" || { cat "$tmp/expect-silent.err"; fail "no login error for the silent portal"; }

# CHAP: the target now requires user hhc with its secret.
tgtadm_ --op new --mode account --user hhc --password s3cr3t-right-0001
tgtadm_ --op bind --mode account --tid 1 --user hhc
echo 's3cr3t-wrong-0002' >"$tmp/wrong.secret"
echo 's3cr3t-right-0001' >"$tmp/right.secret"
expect_fail_with 'error: .*cannot log in.*' \
  run "$(tgt_url)" user=hhc password=+"$tmp/wrong.secret"
expect_fail_with 'error: .*cannot log in.*' run "$(tgt_url)"
if grep -rq 's3cr3t' "$tmp"/expect-*; then
  fail "a CHAP secret appears in nbdkit's output"
fi
# The right secret works.
timeout -k 10 60 nbdkit -U - "$plugin" "$(tgt_url)" user=hhc \
  password=+"$tmp/right.secret" --run 'nbdinfo --size "$uri"' >/dev/null ||
  fail "login with the right CHAP secret failed"
# Each failure is one error line.
for f in "$tmp"/expect-*.err; do
  [ "$(grep -c 'error:' "$f")" -eq 1 ] || { cat "$f"; fail "$f: not one error line"; }
done
