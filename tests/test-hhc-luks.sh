#!/usr/bin/env bash
# Encryption at rest: nbdkit's luks filter stacked above hhc
# (--filter=luks --filter=hhc), so that everything below luks (the
# cache, the HDD log, the backend) holds only ciphertext.
#
# The backend is formatted as LUKSv1 (cryptsetup, passphrase read from a
# file).  In modes hhc (with a log) and wb: 1 MiB of a 16-byte marker is
# written through NBD and flushed, and read back through the stack; the
# marker is in none of the cache, the log and the backend, neither
# before nor after a forced write-back (a drain on the control socket);
# the data survives a kill -9 and a restart; the drained backend reads
# back through luks alone.  A control run without luks finds the marker
# in its cache, so the grep does see plaintext when it is there.  The
# passphrase is only in a file: never in `ps`, nor in nbdkit's output.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdsh cryptsetup numfmt grep ps python3
hhc=$(filter)
make_tmpdir

if ! nbdkit --filter=luks null --dump-plugin >/dev/null 2>&1; then
  [ -z "${CI:-}" ] || fail "nbdkit's luks filter is missing (CI is set)"
  echo "$0: SKIP: nbdkit's luks filter is missing (nbdkit >= 1.32)" >&2
  exit 77
fi

marker=HHC-LUKS-MARKER!
mark_off=$((3 << 20))
mark_len=$((1 << 20))

# The passphrase: random, in a 0600 file, never echoed.
pass=$tmp/passphrase
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '\n' >"$pass")

# count FILE: how many lines of FILE hold the marker (0 if none).
count ()
{
  grep -c -a -F -- "$marker" "$1" || true
}

# no_marker LABEL FILE...: the marker is in none of FILEs.
no_marker ()
{
  local label=$1 f n
  shift
  for f in "$@"; do
    n=$(count "$f")
    [ "$n" -eq 0 ] || fail "$label: the plaintext marker is in $f ($n times)"
  done
}

write_marker ()
{
  nbdsh_u "$1" -c "
m = b'$marker' * ($mark_len // 16)
h.pwrite(m, $mark_off)
h.flush()
assert h.pread($mark_len, $mark_off) == m, 'marker does not read back'"
}

check_marker ()
{
  nbdsh_u "$1" -c "
m = b'$marker' * ($mark_len // 16)
assert h.pread($mark_len, $mark_off) == m, 'marker does not read back'"
}

# drain CONTROL-SOCKET: write every dirty block back, flush the backend.
drain ()
{
  python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sys.argv[1])
s.sendall(b"drain\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
last = out.decode().strip().splitlines()[-1]
if last != "ok":
    sys.exit("drain: " + last)
EOF
}

# The passphrase must not be on any command line or in nbdkit's output.
secret_hidden ()
{
  if ps -eo args | grep -q -F -f "$pass"; then
    fail "the passphrase is on a command line (ps)"
  fi
  if cat "$tmp"/nbdkit-*.log | grep -q -F -f "$pass"; then
    fail "the passphrase is in nbdkit's output"
  fi
}

# Control: without luks, the marker is in the cache as plaintext.
mkdir "$tmp/plain"
truncate -s 32M "$tmp/plain/backend.img"
start_nbdkit -P "$tmp/plain/pid" -U "$tmp/plain/sock" \
  --filter="$hhc" file "$tmp/plain/backend.img" \
  cache="$tmp/plain/cache.img" cache-size=16M mode=wb idle-ms=0 \
  backend-id=luks-control
write_marker "$tmp/plain/sock"
[ "$(count "$tmp/plain/cache.img")" -gt 0 ] ||
  fail "control: grep does not find the marker in a plaintext cache"
stop_nbdkit "$tmp/plain/pid"

# A LUKSv1 image of 32 MiB payload; the key from the passphrase file.
luks_create "$pass" "$tmp/luks.img" 32M
no_marker format "$tmp/luks.img"

for mode in hhc wb; do
  d=$tmp/$mode
  mkdir "$d"
  cp "$tmp/luks.img" "$d/backend.img"
  files=("$d/cache.img" "$d/backend.img")
  stack=(--filter=luks --filter="$hhc" file "$d/backend.img"
         passphrase=+"$pass"
         cache="$d/cache.img" cache-size=16M mode="$mode"
         control="$d/ctl.sock" idle-ms=0 backend-id="luks-$mode")
  if [ "$mode" = hhc ]; then
    stack+=(log="$d/log.img" log-size=16M)
    files+=("$d/log.img")
  fi

  start_nbdkit -P "$d/pid" -U "$d/sock" "${stack[@]}"
  [ "$(nbdinfo --size "$(nbd_uri "$d/sock")")" -eq $((32 << 20)) ] ||
    fail "$mode: the luks payload is not 32 MiB"
  write_marker "$d/sock"
  secret_hidden
  no_marker "$mode, after FLUSH" "${files[@]}"

  # kill -9, restart on the same files: the flushed data reads back.
  kill9_nbdkit "$d/pid"
  no_marker "$mode, after kill -9" "${files[@]}"
  start_nbdkit -P "$d/pid" -U "$d/sock" "${stack[@]}"
  check_marker "$d/sock"

  # Force write-back: every block is now in the backend, encrypted.
  drain "$d/ctl.sock" || fail "$mode: the drain failed"
  stop_nbdkit "$d/pid"
  no_marker "$mode, after write-back" "${files[@]}"

  # The backend alone, through luks without hhc, holds the data.
  start_nbdkit -P "$d/pid2" -U "$d/sock2" --filter=luks \
    file "$d/backend.img" passphrase=+"$pass"
  check_marker "$d/sock2"
  stop_nbdkit "$d/pid2"
  secret_hidden
done
