#!/usr/bin/env bash
# A cache belongs to one backend: another backend is refused.
#
# The identity is the backend's export description (empty for the file
# plugin) and size, or backend-id= when given.  (a) A cache made for
# a.img (16M) is refused for b.img (32M); the refusal leaves the cache
# intact for a.img; format=force gives the cache to b.img, which then
# reads as b.img (nothing of a.img's dirty blocks) and is accepted by
# format=auto and format=never.  (b) Same size, different backend-id=:
# refused, then format=force.  (c) format=never refuses a cache path
# that does not exist and a blank file.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo nbdcopy nbdsh qemu-io cmp
hhc=$(filter)
make_tmpdir

refused='hhc:.*(identity|belongs to)'

# try CACHE BACKEND ARGS...: start a gateway in the foreground; the
# cases that use it expect nbdkit to refuse to start and exit.  (Not
# --run: nbdkit starts the command before the filter opens the cache,
# and a client of a server that gave up waits forever.)  A gateway
# that wrongly starts is stopped by timeout, and the case fails.
try ()
{
  local cache=$1 backend=$2
  shift 2
  rm -f "$tmp/try.sock"
  timeout 60 nbdkit -f -U "$tmp/try.sock" --filter="$hhc" file "$backend" \
          cache="$cache" cache-size=16M mode=wb "$@"
}

# serve CACHE BACKEND ARGS...: start the gateway on $tmp/sock.
serve ()
{
  local cache=$1 backend=$2
  shift 2
  start_nbdkit -P "$tmp/pid" -U "$tmp/sock" --filter="$hhc" \
               file "$backend" cache="$cache" cache-size=16M mode=wb "$@"
}

# must_read_as BACKEND: the running gateway serves BACKEND's bytes.
must_read_as ()
{
  nbdcopy "$(nbd_uri "$tmp/sock")" "$tmp/out.img"
  cmp "$1" "$tmp/out.img" || fail "gateway does not serve $1"
}

# --- (a) different size ------------------------------------------------
head -c 16M /dev/urandom >"$tmp/a.img"
head -c 32M /dev/urandom >"$tmp/b.img"
cp "$tmp/b.img" "$tmp/b-orig.img"
c=$tmp/cache-a.img

serve "$c" "$tmp/a.img"
qemu_io_u "$tmp/sock" -c 'write -P 0x5a 0 1M' -c flush >/dev/null
stop_nbdkit "$tmp/pid"

expect_fail_with "$refused" try "$c" "$tmp/b.img"

serve "$c" "$tmp/a.img"
nbdsh_u "$tmp/sock" -c 'assert h.pread(1 << 20, 0) == b"\x5a" * (1 << 20)' ||
  fail "(a) the refusal damaged a.img's cache"
stop_nbdkit "$tmp/pid"

serve "$c" "$tmp/b.img" format=force
must_read_as "$tmp/b-orig.img"
stop_nbdkit "$tmp/pid"
serve "$c" "$tmp/b.img"
must_read_as "$tmp/b-orig.img"
stop_nbdkit "$tmp/pid"
serve "$c" "$tmp/b.img" format=never
must_read_as "$tmp/b-orig.img"
stop_nbdkit "$tmp/pid"

# --- (b) same size, different backend-id= ------------------------------
cp "$tmp/b-orig.img" "$tmp/b2.img"
truncate -s 16M "$tmp/b2.img"
cp "$tmp/b2.img" "$tmp/b2-orig.img"
c=$tmp/cache-id.img

serve "$c" "$tmp/a.img" backend-id=volume-A
qemu_io_u "$tmp/sock" -c 'write -P 0x6b 4k 8k' -c flush >/dev/null
stop_nbdkit "$tmp/pid"

expect_fail_with "$refused" try "$c" "$tmp/b2.img" backend-id=volume-B

serve "$c" "$tmp/b2.img" backend-id=volume-B format=force
must_read_as "$tmp/b2-orig.img"
stop_nbdkit "$tmp/pid"

# --- (c) format=never needs a formatted cache --------------------------
expect_fail_with 'hhc:.*(format|missing\.img|No such file)' \
                 try "$tmp/missing.img" "$tmp/a.img" format=never
truncate -s 16M "$tmp/blank.img"
expect_fail_with 'hhc:.*(format|blank\.img)' \
                 try "$tmp/blank.img" "$tmp/a.img" format=never
