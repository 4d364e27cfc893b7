#!/usr/bin/env bash
# `nbdkit --filter=hhc null --help` lists every parameter of the filter.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit
hhc=$(filter)
make_tmpdir

nbdkit --filter="$hhc" null --help >"$tmp/help.txt"

missing=()
for key in cache cache-size mode log log-size segment-size log-buffers \
           ssd-sync block-size dirty-low dirty-high dirty-max hot-ratio \
           format backend-id require-backend-id direct stats control \
           writeback-threads idle-ms seq-cutoff promote promote-hits \
           promote-window log-lost log-inflight; do
  grep -Eq "^[[:space:]]*$key=" "$tmp/help.txt" || missing+=("$key=")
done
if [ "${#missing[@]}" -ne 0 ]; then
  cat "$tmp/help.txt" >&2
  fail "--help does not list: ${missing[*]}"
fi
