#!/usr/bin/env bash
# scripts/dist-check passes a tarball that holds every tracked file and
# fails, naming the file, one that lacks a tracked file or carries an
# untracked one (a scratch git repository, not this tree).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires git tar
make_tmpdir
check=$abs_top_srcdir/scripts/dist-check

repo=$tmp/repo
mkdir -p "$repo/docs" "$repo/m4"
echo readme >"$repo/README.md"
echo doc >"$repo/docs/a.md"
echo '*.o' >"$repo/.gitignore"
: >"$repo/m4/.gitkeep"
git -C "$repo" init -q
git -C "$repo" add -A

# pack FILE...: $tmp/pkg-1.0.tar.gz of those files of $repo,
# plus autoreconf's configure (never tracked).
pack ()
{
  rm -rf "$tmp/pkg-1.0" "$tmp/pkg-1.0.tar.gz"
  mkdir -p "$tmp/pkg-1.0"
  (cd "$repo" && cp --parents "$@" "$tmp/pkg-1.0/")
  : >"$tmp/pkg-1.0/configure"
  tar czf "$tmp/pkg-1.0.tar.gz" -C "$tmp" pkg-1.0
}

pack README.md docs/a.md
"$check" "$tmp/pkg-1.0.tar.gz" "$repo" >"$tmp/out" ||
  { cat "$tmp/out"; fail "a complete tarball was refused"; }

pack README.md
if "$check" "$tmp/pkg-1.0.tar.gz" "$repo" >"$tmp/out"; then
  fail "a tarball without docs/a.md passed"
fi
grep -q '^  docs/a.md$' "$tmp/out" || { cat "$tmp/out"; fail "docs/a.md not named"; }

pack README.md docs/a.md
echo junk >"$tmp/pkg-1.0/stray.txt"
tar czf "$tmp/pkg-1.0.tar.gz" -C "$tmp" pkg-1.0
if "$check" "$tmp/pkg-1.0.tar.gz" "$repo" >"$tmp/out"; then
  fail "a tarball with an untracked file passed"
fi
grep -q '^  stray.txt$' "$tmp/out" || { cat "$tmp/out"; fail "stray.txt not named"; }
