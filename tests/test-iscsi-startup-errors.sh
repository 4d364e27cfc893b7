#!/usr/bin/env bash
# hhciscsi: a wrong target IQN, a wrong LUN, an unreachable portal or a
# wrong CHAP secret stops nbdkit at start-up, non-zero, with one clear
# error line (and the secret appears nowhere in the output).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit
make_tmpdir
source "$(dirname "$0")/tgtd.sh"
plugin=$(plugin)

start_tgtd
truncate -s 8M "$tmp/lun.img"
add_lun iqn.2026-01.test:errors "$tmp/lun.img"

# Without --run: nbdkit -f must itself exit non-zero.  (With --run,
# nbdkit 1.32 exits 0 after a failing .after_fork.)
run () { rm -f "$tmp/e.sock"; timeout 60 nbdkit -f -U "$tmp/e.sock" "$plugin" "$@" timeout=5; }

expect_fail_with 'error: .*cannot log in to iqn.2026-01.test:nosuch' \
  run "iscsi://$tgt_portal/iqn.2026-01.test:nosuch/1"
expect_fail_with 'error: .*LUN 7: .*(NOT_SUPPORTED|not supported)' \
  run "$(tgt_url 7)"

# A port that nothing listens on.
closed=$tgt_port
while ! _tgt_port_free "$closed"; do closed=$(( closed + 1 )); done
expect_fail_with "error: .*127.0.0.1:$closed" \
  run "iscsi://127.0.0.1:$closed/$tgt_iqn/1"

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
timeout 60 nbdkit -U - "$plugin" "$(tgt_url)" user=hhc \
  password=+"$tmp/right.secret" --run 'nbdinfo --size "$uri"' >/dev/null ||
  fail "login with the right CHAP secret failed"
# Each failure is one error line.
for f in "$tmp"/expect-*.err; do
  [ "$(grep -c 'error:' "$f")" -eq 1 ] || { cat "$f"; fail "$f: not one error line"; }
done
