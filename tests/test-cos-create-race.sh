#!/usr/bin/env bash
# cos plugin: four gateways make the same new volume at once
# (create=true): volume.json is written with If-None-Match: *, so one
# of them makes it and the others, answered 412, open that one: all
# four serve the same identity, and the bucket holds one volume.json.
# On s3server.py every PUT is answered 2 s late, so that all four find
# no volume before any makes one: at least one must take the 412 path.
# On RGW (HHC_S3=rgw, which honours the header) they only start at
# once, and the 412 path is likely, not certain.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nbdkit nbdinfo
make_tmpdir
source "$(dirname "$0")/s3.sh"
plugin=$(cos_plugin)

if [ "$s3_store" = local ]; then
  start_s3server --bucket vol --fault-delay 1 --delay 2 --fault-ops PUT
else
  start_s3server --bucket vol
fi
read -r -a creds <<<"$(s3_creds)"

pids=()
for i in 1 2 3 4; do
  timeout 120 nbdkit -v -U - "$plugin" endpoint="$s3_endpoint" \
    bucket="$s3_bucket" prefix=race "${creds[@]}" create=true size=1M \
    object-size=64K --run 'nbdinfo --json "$uri"' \
    >"$tmp/info.$i" 2>"$tmp/log.$i" &
  pids+=($!)
done
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
if [ "$st" -ne 0 ]; then
  cat "$tmp"/log.* | grep -v 'debug:' >&2 || :
  fail "a gateway failed to start"
fi

for i in 1 2 3 4; do
  python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["exports"][0]["description"])' \
    "$tmp/info.$i"
done | sort -u >"$tmp/descs"
[ "$(wc -l <"$tmp/descs")" -eq 1 ] ||
  fail "the gateways serve different volumes: $(cat "$tmp/descs")"
[ "$(s3_objects race/)" = volume.json ] ||
  fail "the bucket holds more than one volume.json: $(s3_objects race/)"
lost=$(cat "$tmp"/log.* | grep -c 'made by another gateway meanwhile' || :)
echo "$_hhc_name: $lost of 4 lost the race and opened the winner's volume"
if [ "$s3_store" = local ] && [ "$lost" -lt 1 ]; then
  fail "no gateway took the If-None-Match path"
fi
echo "$_hhc_name: ok"
