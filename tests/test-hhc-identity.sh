#!/usr/bin/env bash
# A cache belongs to one backend: another backend is refused.
#
# The identity is the backend's export description (empty for the file
# plugin) and size, or backend-id= when given.  (a) A cache made for
# a.img (16M, require-backend-id=false: the empty description, so the
# size alone) is refused for b.img (32M); the refusal leaves the cache
# intact for a.img; format=force gives the cache to b.img, which then
# reads as b.img (nothing of a.img's dirty blocks) and is accepted by
# format=auto and format=never.  (b) Same size, different backend-id=:
# refused, then format=force.  (c) format=never refuses a cache path
# that does not exist and a blank file.  (d) Without backend-id= (and
# require-backend-id=false) no cache is formatted for the file plugin:
# one error line, and no cache or log file is created, an existing
# file (not a cache, or a cache under format=force) is left as it was.
# (e) require-backend-id=false formats one, with a warning, and it
# serves; a later start without it loads that cache.  (f) A cache
# formatted with backend-id= loads again with it, and is refused
# without it.
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

serve "$c" "$tmp/a.img" require-backend-id=false
qemu_io_u "$tmp/sock" -c 'write -P 0x5a 0 1M' -c flush >/dev/null
stop_nbdkit "$tmp/pid"

expect_fail_with "$refused" try "$c" "$tmp/b.img"

serve "$c" "$tmp/a.img"
nbdsh_u "$tmp/sock" -c 'assert h.pread(1 << 20, 0) == b"\x5a" * (1 << 20)' ||
  fail "(a) the refusal damaged a.img's cache"
stop_nbdkit "$tmp/pid"

serve "$c" "$tmp/b.img" format=force require-backend-id=false
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
# (backend-id=: not the refusal to format without one, (d).)
expect_fail_with 'hhc:.*(format|missing\.img|No such file)' \
                 try "$tmp/missing.img" "$tmp/a.img" format=never \
                 backend-id=volume-C
truncate -s 16M "$tmp/blank.img"
expect_fail_with 'hhc:.*(format|blank\.img)' \
                 try "$tmp/blank.img" "$tmp/a.img" format=never \
                 backend-id=volume-C

# --- (d) no backend-id=: no cache is formatted ---------------------------
# no_id_refused CACHE ARGS...: try fails with the one error line.
no_id_msg="the backend has no export description: set backend-id= to a \
name unique to this backend before the cache is formatted (or \
require-backend-id=false to tie it to the backend's size alone)"
no_id_refused ()
{
  local cache=$1 st=0 n
  shift
  try "$cache" "$tmp/a.img" "$@" 2>"$tmp/no-id.err" || st=$?
  n=$(grep -c 'error' "$tmp/no-id.err" || true)
  if [ "$st" -eq 0 ] || [ "$st" -eq 124 ] || [ "$n" -ne 1 ] ||
     ! grep -Fq "hhc: $cache: $no_id_msg" "$tmp/no-id.err"; then
    cat "$tmp/no-id.err" >&2
    fail "(d) $cache (exit status $st): not the one error line refusing" \
         "to format without backend-id="
  fi
}

c=$tmp/cache-noid.img
no_id_refused "$c"
[ ! -e "$c" ] || fail "(d) the refusal left $c behind"
no_id_refused "$c" mode=hhc log="$tmp/log-noid.img" log-size=8M
if [ -e "$c" ] || [ -e "$tmp/log-noid.img" ]; then
  fail "(d) the refusal in mode hhc left the cache or the log behind"
fi
head -c 16M /dev/urandom >"$c"
cp "$c" "$tmp/cache-noid.orig"
no_id_refused "$c"
cmp "$c" "$tmp/cache-noid.orig" || fail "(d) the refusal changed $c"
# format=force over a cache of the size alone, (a)'s: kept as it was.
cp "$tmp/cache-a.img" "$tmp/cache-a.orig"
no_id_refused "$tmp/cache-a.img" format=force
cmp "$tmp/cache-a.img" "$tmp/cache-a.orig" ||
  fail "(d) the refused format=force changed the cache"

# --- (e) require-backend-id=false --------------------------------------
c=$tmp/cache-size-only.img
serve "$c" "$tmp/a.img" require-backend-id=false
# (The start-up log of this nbdkit: functions.sh numbers them.)
grep -Fq 'warning: the backend has no export description and backend-id=' \
     "$tmp/nbdkit-$_hhc_nlogs.log" ||
  fail "(e) no warning that the cache is tied to the size alone"
qemu_io_u "$tmp/sock" -c 'write -P 0x7c 64k 64k' -c flush >/dev/null
nbdsh_u "$tmp/sock" -c 'assert h.pread(65536, 65536) == b"\x7c" * 65536' ||
  fail "(e) the gateway does not serve what was written"
stop_nbdkit "$tmp/pid"
# Loading a cache that exists needs no backend-id=.
serve "$c" "$tmp/a.img"
nbdsh_u "$tmp/sock" -c 'assert h.pread(65536, 65536) == b"\x7c" * 65536' ||
  fail "(e) the cache of the size alone does not load without the flag"
stop_nbdkit "$tmp/pid"

# --- (f) a cache formatted with backend-id= -----------------------------
c=$tmp/cache-f.img
serve "$c" "$tmp/a.img" backend-id=volume-F
qemu_io_u "$tmp/sock" -c 'write -P 0x3e 128k 64k' -c flush >/dev/null
stop_nbdkit "$tmp/pid"
serve "$c" "$tmp/a.img" backend-id=volume-F format=never
nbdsh_u "$tmp/sock" -c 'assert h.pread(65536, 131072) == b"\x3e" * 65536' ||
  fail "(f) the cache formatted with backend-id= lost its data"
stop_nbdkit "$tmp/pid"
cp "$c" "$tmp/cache-f.orig"
expect_fail_with "$refused" try "$c" "$tmp/a.img"
cmp "$c" "$tmp/cache-f.orig" || fail "(f) the refused start changed the cache"
