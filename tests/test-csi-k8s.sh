#!/usr/bin/env bash
# conf/k8s/'s manifests agree with hhc-csi and hhc-gateway
# (tests/csi/k8s-check.py says what it checks): every YAML document
# parses; the driver's name, sockets, registration path, mounts and
# configs agree; csi.json passes hhc-csi --check and gateway.json
# hhc-gateway --check (its run_dir and volumes_dir moved into the test
# directory).  Then each of a list of deliberately broken copies of
# conf/k8s must fail the check with the expected message, so that a
# check that cannot fail is noticed.
set -euo pipefail
source "$(dirname "$0")/functions.sh"

make_tmpdir
src=${abs_top_srcdir:-$(dirname "$0")/..}
csi=$abs_top_builddir/csi/hhc-csi
gateway=$abs_top_builddir/appliance/hhc-gateway
check=$src/tests/csi/k8s-check.py
[ -x "$csi" ] || fail "$csi: not built"
[ -x "$gateway" ] || fail "$gateway: not built"
requires /usr/bin/python3
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
  [ -z "${CI:-}" ] || fail "python3's yaml module is missing (python3-yaml)"
  echo "$0: SKIP: python3's yaml module is missing (python3-yaml)" >&2
  exit 77
fi

# The manifests as they are.
mkdir "$tmp/ok"
/usr/bin/python3 "$check" "$src/conf/k8s" "$csi" "$gateway" "$tmp/ok" ||
  fail "conf/k8s does not agree with hhc-csi and hhc-gateway (above)"

# broken NAME FILE SED-SCRIPT REGEX: a copy of conf/k8s with sed
# SED-SCRIPT applied to FILE (which must change it) fails the check with
# a message matching REGEX.
n=0
broken ()
{
  local name=$1 file=$2 script=$3 re=$4 d st=0
  n=$((n + 1))
  d=$tmp/broken-$n
  mkdir -p "$d/tmp"
  cp -R "$src/conf/k8s" "$d/k8s"
  sed -e "$script" "$src/conf/k8s/$file" >"$d/k8s/$file"
  ! cmp -s "$src/conf/k8s/$file" "$d/k8s/$file" ||
    fail "$name: the sed script changed nothing in $file"
  /usr/bin/python3 "$check" "$d/k8s" "$csi" "$gateway" "$d/tmp" \
    >"$d/out" 2>"$d/err" || st=$?
  [ "$st" -eq 1 ] ||
    fail "$name: exit status $st, expected 1 ($(cat "$d/err"))"
  grep -Eq "^k8s-check: FAIL: .*($re)" "$d/err" ||
    fail "$name: no failure matching '$re': $(cat "$d/err")"
}

name=hhc.csi.hhc-gateway.io
broken yaml example-pvc.yaml '$a\  : : [' 'does not parse'
broken driver-name csi-driver.yaml "s/name: $name/name: hhc.csi.example.io/" \
  'CSIDriver name hhc.csi.example.io is not'
broken attach-required csi-driver.yaml 's/attachRequired: false/attachRequired: true/' \
  'attachRequired'
broken provisioner storageclass-file.yaml "s/^provisioner: .*/provisioner: other.csi.io/" \
  'provisioner other.csi.io is not'
broken registration csi-node.yaml \
  "s|kubelet-registration-path=/var/lib/kubelet/plugins/$name/|kubelet-registration-path=/var/lib/kubelet/plugins/hhc-csi/|" \
  'kubelet-registration-path=.* is not where'
broken plugin-dir csi-node.yaml \
  "s|path: /var/lib/kubelet/plugins/$name,|path: /var/lib/kubelet/plugins/hhc,|" \
  'socket /csi/csi.sock is not in the host'
broken csi-address csi-controller.yaml \
  's|--csi-address=/csi/csi.sock|--csi-address=/tmp/csi.sock|' \
  "--csi-address=/tmp/csi.sock is not hhc-csi's"
broken csi-json csi-controller.yaml 's/"attach": "auto",/"attach": "auto", "atach": 1,/' \
  'hhc-csi --check:.*atach'
broken gateway-json csi-node.yaml 's/"port": 9810 }/"port": 98100 }/' \
  'hhc-gateway --check'
broken nbd-port csi-node.yaml 's/"port": 10809/"port": 10810/' \
  'the gateway listens on 127.0.0.1 port 10810'
broken gateway-config csi-controller.yaml 's|"gateway_config": "/etc/hhc/gateway.json"|"gateway_config": "/etc/hhc/gw.json"|' \
  'node.gateway_config /etc/hhc/gw.json is not'
broken state-mount csi-node.yaml '/name: state, mountPath: \/var\/lib\/hhc-csi, readOnly: true/d' \
  'node.state_dir /var/lib/hhc-csi is not mounted .* in hhc-gateway'
broken cache-hostpath csi-node.yaml 's|hostPath: { path: /var/lib/hhc/cache, type: DirectoryOrCreate }|emptyDir: {}|' \
  'node.cache_dir /var/lib/hhc/cache in hhc-csi is not a hostPath'
broken propagation csi-node.yaml 's/, mountPropagation: Bidirectional//' \
  'Bidirectional'
broken shared-pid csi-node.yaml 's/shareProcessNamespace: true/shareProcessNamespace: false/' \
  'shareProcessNamespace'
broken rbac csi-controller.yaml 's/verbs: \[get\]$/verbs: [list]/' \
  'may not get secrets'
broken param storageclass-file.yaml 's/^  backend: local$/  backend: local\n  fsType: ext4/' \
  'unknown parameter fsType'
broken backend storageclass-file.yaml 's/^  backend: local$/  backend: nfs/' \
  'backend nfs is not a backend of csi.json'
broken secret-key storageclass-cos.yaml 's/^  access_key:/  accessKey:/' \
  'expected access_key and secret_key'
broken secret-ref storageclass-cos.yaml '/node-stage-secret-namespace/d' \
  'needs csi.storage.k8s.io/node-stage-secret-namespace'
broken static-pv iscsi-pv.yaml 's/volumeHandle: san:db1/volumeHandle: san:db9/' \
  'volumeHandle san:db9 is not'
broken claims-mount csi-node.yaml '/name: claims, mountPath: \/var\/lib\/hhc\/claims/d' \
  'backend san claims_dir /var/lib/hhc/claims is not mounted at .* in hhc-csi'
broken claims-export csi-controller.yaml 's|path: /exports/hhc-claims }|path: /exports/other }|' \
  'backend san claims_dir: .*Deployment hhc-csi-controller mounts nfs 192.0.2.20 /exports/other'
broken claims-emptydir csi-node.yaml 's|nfs: { server: 192.0.2.20, path: /exports/hhc-claims }|emptyDir: {}|' \
  'claims_dir /var/lib/hhc/claims is not on a volume nodes share'
echo "$_hhc_name: conf/k8s agrees; $n broken copies refused"
