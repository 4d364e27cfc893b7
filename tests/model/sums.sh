# tests/model/sums.sh, sourced by check-model.sh and check-commit.sh.
# The spin models are not built from the code: an unchanged model, with
# the same scripts and bounds, gives the same answer.  A check that
# passed in full with HHC_MODEL_RECORD=1 records the sums of what it
# checked in tests/model/checked.sha256; make check then only verifies
# them (a changed file runs the check in full).  HHC_MODEL_ALWAYS=1 (or
# HHC_MODEL_FULL=1) runs it in full anyway.  CI ran both on every push
# (230 s and 40 s of its 25 minutes) for files that rarely change.

sums=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/checked.sha256

# model_unchanged NAME FILE...: is each FILE's sum the one recorded for
# check NAME (and no full run asked for)?
model_unchanged ()
{
  local name=$1 f want got
  shift
  [ -z "${HHC_MODEL_ALWAYS:-}${HHC_MODEL_RECORD:-}${HHC_MODEL_FULL:-}" ] ||
    return 1
  [ -f "$sums" ] || return 1
  for f in "$@"; do
    want=$(awk -v n="$name" -v f="$(basename "$f")" \
      '$1 == n && $3 == f { print $2 }' "$sums")
    got=$(sha256sum <"$f" | cut -d' ' -f1)
    [ -n "$want" ] && [ "$want" = "$got" ] || return 1
  done
}

# model_record NAME FILE...: with HHC_MODEL_RECORD=1, record each FILE's
# sum for check NAME (after it passed).
model_record ()
{
  local name=$1 f
  shift
  [ -n "${HHC_MODEL_RECORD:-}" ] || return 0
  {
    grep -v "^$name " "$sums" 2>/dev/null || true
    for f in "$@"; do
      echo "$name $(sha256sum <"$f" | cut -d' ' -f1) $(basename "$f")"
    done
  } >"$sums.new"
  mv "$sums.new" "$sums"
  echo "$name: sums recorded in $sums"
}
