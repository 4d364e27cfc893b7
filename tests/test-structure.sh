#!/usr/bin/env bash
# The house rules a build can check (tests/structure.py): no production
# C file over 1,000 lines, no function over 150, no two files that call
# each other in a loop, no test device in the installed modules.
set -euo pipefail
source "$abs_top_srcdir/tests/functions.sh"
requires ctags nm python3
ctags --version | grep -q 'Universal Ctags' ||
  { [ -n "${CI:-}" ] && fail "ctags is not Universal Ctags"; exit 77; }
python3 "$abs_top_srcdir/tests/structure.py" "$abs_top_srcdir" \
  "$abs_top_builddir" || fail "the structure rules above are broken"
