#!/usr/bin/env bash
# The Debian packages (debian/): built with dpkg-buildpackage in a
# scratch copy of the source, lintian-clean (no E: tag), installed with
# apt-get; the filter and plugins load by name, every man page is found,
# the unit passes systemd-analyze verify, hhc-gateway --check accepts
# the shipped example (its paths moved into the scratch directory);
# apt-get purge then leaves none of their files behind.
#
# Heavy (a package build, about a minute, and installing into this
# system, as root): it runs when HHC_TEST_DEB=1, or when CI is set and
# HHC_TEST_DEB is not 0 (scripts/check runs it in a stage of its own).
#
# The scratch copy: in a git checkout, the files git tracks as they are
# in the working tree (what a fresh clone holds, plus uncommitted
# edits, without build directories or the in-tree configure's
# leftovers); in an unpacked release tarball, the whole tree (make dist
# carries debian/).
set -euo pipefail
source "$(dirname "$0")/functions.sh"

case ${HHC_TEST_DEB:-} in
  1) ;;
  0) echo "test-deb.sh: SKIP: HHC_TEST_DEB=0" >&2; exit 77 ;;
  *) if [ -z "${CI:-}" ]; then
       echo "test-deb.sh: SKIP: set HHC_TEST_DEB=1 (or CI) to build" \
            "and install the Debian packages" >&2
       exit 77
     fi ;;
esac
requires dpkg-buildpackage dpkg-query apt-get lintian nbdkit nbdinfo man \
  systemd-analyze
if [ "$(id -u)" -ne 0 ]; then
  [ -n "${CI:-}" ] && fail "must run as root (it installs the packages)"
  echo "test-deb.sh: SKIP: not root (it installs the packages)" >&2
  exit 77
fi

packages=(nbdkit-hhc-filter nbdkit-cos-plugin nbdkit-hhciscsi-plugin
  hhc-gateway hhc-csi)
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  case $status in
    '' | not-installed) ;;
    *) fail "$p is on this system already ($status); the test would" \
            "remove it: apt-get purge it first" ;;
  esac
done

start=$SECONDS
make_tmpdir

# The make check that runs us must not reach the package's own build
# (its TESTS=, jobserver and make level).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

src=$tmp/src/hhc-gateway
mkdir -p "$src"
if git -C "$abs_top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1
then
  (cd "$abs_top_srcdir" && git ls-files -z | tar --null -T - -cf -) |
    tar -xf - -C "$src"
else
  [ -f "$abs_top_srcdir/config.status" ] &&
    fail "$abs_top_srcdir is configured in place: make distclean first"
  cp -a "$abs_top_srcdir/." "$src/"
fi
[ -f "$src/debian/control" ] || fail "no debian/ in the source tree"

echo "test-deb.sh: dpkg-buildpackage -b -uc -us in $src"
if ! (cd "$src" && dpkg-buildpackage -b -uc -us) >"$tmp/build.log" 2>&1
then
  tail -n 60 "$tmp/build.log"
  fail "dpkg-buildpackage failed (log above)"
fi
echo "test-deb.sh: built in $(( SECONDS - start ))s"
debs=()
for p in "${packages[@]}"; do
  f=("$tmp"/src/"${p}"_*.deb)
  [ -f "${f[0]}" ] || fail "dpkg-buildpackage made no $p package"
  debs+=("${f[0]}")
done

lintian "$tmp"/src/*.changes >"$tmp/lintian.out" 2>&1 || true
cat "$tmp/lintian.out"
if grep -q '^E: ' "$tmp/lintian.out"; then
  fail "lintian reports errors"
fi

# Undo what the install does, whether the test passes or not: purge the
# packages, and remove the system user and its state directory when they
# did not exist before (purge leaves them, as Debian packages do).
had_user=no
getent passwd hhc >/dev/null && had_user=yes
had_state=no
[ -e /var/lib/hhc ] && had_state=yes
undo_install ()
{
  local p installed=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
      grep -qv '^not-installed$' && installed+=("$p")
  done
  if [ ${#installed[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${installed[@]}" \
      >/dev/null || return 1
  fi
  if [ "$had_user" = no ] && getent passwd hhc >/dev/null; then
    # (deluser's note that cron is missing is not an error)
    deluser --system --quiet hhc >/dev/null 2>&1 || return 1
    if getent group hhc >/dev/null; then
      delgroup --system --quiet hhc >/dev/null 2>&1 || return 1
    fi
  fi
  [ "$had_state" = yes ] || rm -rf /var/lib/hhc
}
cleanup_fn undo_install

DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${debs[@]}" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "apt-get install of the packages failed"; }
getent passwd hhc >/dev/null || fail "postinst did not create the user hhc"

# The filter by name, in front of a plugin, serves a volume.
size=$(timeout 60 nbdkit -U - --filter=hhc null 1M cache="$tmp/cache" \
         cache-size=4M backend-id=test-deb --run 'nbdinfo --size "$uri"') ||
  fail "nbdkit --filter=hhc null did not serve"
[ "$size" = 1048576 ] || fail "nbdkit --filter=hhc null: size $size"
for plugin in cos hhciscsi hhcroute; do
  nbdkit "$plugin" --dump-plugin >"$tmp/dump" 2>&1 ||
    { cat "$tmp/dump"; fail "nbdkit $plugin --dump-plugin failed"; }
  grep -q "^name=$plugin\$" "$tmp/dump" ||
    { cat "$tmp/dump"; fail "nbdkit $plugin --dump-plugin: no name=$plugin"; }
done

# The CSI driver runs and names itself.
hhc-csi --version | grep -q '(hhc.csi.hhc-gateway.io)$' ||
  fail "hhc-csi --version does not name the driver"

for page in 1:nbdkit-hhc-filter 1:nbdkit-cos-plugin 1:nbdkit-hhciscsi-plugin \
            8:hhc-gateway 8:hhcctl 5:hhc-gateway.json 8:hhc-csi; do
  man -w "${page%%:*}" "${page#*:}" >/dev/null ||
    fail "man -w ${page%%:*} ${page#*:}: not installed"
done

unit=$(dpkg-query -L hhc-gateway | grep '/systemd/system/hhc-gateway.service$') ||
  fail "hhc-gateway has no systemd unit"
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit failed"
grep -q '^ExecStart=/usr/sbin/hhc-gateway -c /etc/hhc/gateway.json$' "$unit" ||
  fail "$unit does not run /usr/sbin/hhc-gateway -c /etc/hhc/gateway.json"
[ -d /etc/hhc ] || fail "no /etc/hhc"

# The shipped example, with every path it names moved under $tmp (and
# those files created): hhc-gateway --check checks that they exist.
example=/usr/share/doc/hhc-gateway/examples/gateway.example.json
[ -f "$example" ] || fail "no $example"
# Its nbdkit is this system's (--check does not look).
bin=$(sed -n 's/^ *"nbdkit": "\([^"]*\)".*/\1/p' "$example")
[ -x "$bin" ] || fail "$example: nbdkit $bin: not an executable here"
sed -e "s|/dev/disk/by-id/|$tmp/dev/|g" -e "s|/etc/hhc/|$tmp/etc/|g" \
    -e "s|/srv/hhc/|$tmp/srv/|g" -e "s|/var/lib/hhc/|$tmp/state/|g" \
    -e "s|\"/run/hhc\"|\"$tmp/run\"|" \
    "$example" >"$tmp/gateway.json"
mkdir -p "$tmp/dev" "$tmp/etc" "$tmp/srv" "$tmp/state" "$tmp/run"
grep -o "\"$tmp/[^\"]*\"" "$tmp/gateway.json" | tr -d '"' | sort -u |
  while read -r f; do
    [ -e "$f" ] || truncate -s 64M "$f"
  done
hhc-gateway --check -c "$tmp/gateway.json" >"$tmp/check.out" 2>&1 ||
  { cat "$tmp/check.out"; fail "hhc-gateway --check rejects the example"; }
grep -q ': ok, 3 volumes$' "$tmp/check.out" ||
  { cat "$tmp/check.out"; fail "hhc-gateway --check: unexpected output"; }
hhcctl --help >/dev/null || fail "hhcctl --help failed"

# Purge: nothing of the packages may stay (outside /etc, which holds
# what the operator wrote).
for deb in "${debs[@]}"; do
  dpkg-deb --fsys-tarfile "$deb" | tar -tf - | sed -e 's|^\./|/|'
done | grep -v '/$' | grep -v '^/etc/' | sort -u >"$tmp/files"
[ -s "$tmp/files" ] || fail "the packages list no files"
undo_install || fail "apt-get purge failed"
left=()
while read -r f; do
  [ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done <"$tmp/files"
[ ${#left[@]} -eq 0 ] || fail "left behind after purge: ${left[*]}"
[ ! -e /etc/systemd/system/multi-user.target.wants/hhc-gateway.service ] ||
  fail "the unit's enablement symlink is left behind after purge"

echo "test-deb.sh: ok in $(( SECONDS - start ))s"
