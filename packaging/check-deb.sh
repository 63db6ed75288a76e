#!/usr/bin/env bash
# Checks a built Tessera package without installing it: the files it must hold (dpkg-deb -c), its declared
# dependencies (Qt 6 run-time libraries, QCustomPlot, RE2; nothing for building, no libtorch), that the executable
# does not link libtorch, and that the desktop entry, AppStream metadata, man page and completion are well-formed.
#
# Usage: packaging/check-deb.sh DEB
# Quick (seconds): CI runs it after packaging/build-deb.sh. packaging/check-deb-install.sh installs the package on a
# bare Debian 12 and uses it.
set -euo pipefail

[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 DEB" >&2; exit 2; }
deb="$1"
failures=0
ok() { printf 'check-deb: ok    %s\n' "$*"; }
bad() { printf 'check-deb: FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }
check() { # check DESCRIPTION COMMAND…
  local what="$1"; shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

version="$(dpkg-deb -f "$deb" Version)"
depends="$(dpkg-deb -f "$deb" Depends)"
contents="$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|')"
has() { grep -qxF "$1" <<<"$contents"; }

# ---- files ------------------------------------------------------------------------------------------------------
required=(
  /usr/bin/tessera
  /usr/share/applications/org.tessera.Tessera.desktop
  /usr/share/metainfo/org.tessera.Tessera.metainfo.xml
  /usr/share/icons/hicolor/scalable/apps/org.tessera.Tessera.svg
  /usr/share/man/man1/tessera.1.gz
  /usr/share/bash-completion/completions/tessera
  /usr/share/doc/tessera/copyright
)
for size in 16 22 24 32 48 64 128 256 512; do
  required+=("/usr/share/icons/hicolor/${size}x${size}/apps/org.tessera.Tessera.png")
done
# The demo: every file of resources/demo, under /usr/share/tessera/demo.
repo="$(cd "$(dirname "$0")/.." && pwd)"
while IFS= read -r file; do
  required+=("/usr/share/tessera/demo/${file#resources/demo/}")
done < <(cd "$repo" && find resources/demo -type f | sort)
missing=0
for file in "${required[@]}"; do
  has "$file" || { bad "missing $file"; missing=$((missing + 1)); }
done
[ "$missing" -gt 0 ] || ok "all ${#required[@]} files present (executable, desktop entry, metainfo, icons, man page, completion, demo)"
extra="$(grep -vE '/$' <<<"$contents" | grep -vxF -f <(printf '%s\n' "${required[@]}") || true)"
if [ -n "$extra" ]; then bad "files nobody asked for:"$'\n'"$extra"; else ok "no other files"; fi

# ---- dependencies -----------------------------------------------------------------------------------------------
# RE2's run-time package is named after its soname (libre2-9 on Debian 12).
for lib in libqt6core6 libqt6gui6 libqt6widgets6 libqt6svg6 libqcustomplot2.1-qt6 'libre2-[0-9]+'; do
  grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || bad "Depends lacks $lib: $depends"
done
ok "Depends: $depends"
if grep -qiE 'torch|-dev( |,|$)|cmake|g\+\+|ninja' <<<"$depends $(dpkg-deb -f "$deb" Recommends)"; then
  bad "depends on something for building or on libtorch: $depends"
else
  ok "nothing for building, no libtorch"
fi

# ---- the files themselves ---------------------------------------------------------------------------------------
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
needed="$(objdump -p "$root/usr/bin/tessera" | awk '/NEEDED/ { print $2 }')"
if grep -qiE 'torch|c10' <<<"$needed"; then bad "the executable links libtorch: $(tr '\n' ' ' <<<"$needed")"; else
  ok "the executable does not link libtorch (NEEDED: $(tr '\n' ' ' <<<"$needed"))"; fi
printed="$("$root/usr/bin/tessera" --version 2>/dev/null || true)"
check "tessera --version prints the package version ($printed)" test "$printed" = "tessera $version"
if ! command -v desktop-file-validate >/dev/null && [ "$(id -u)" -eq 0 ]; then
  echo "check-deb: installing desktop-file-utils (desktop-file-validate)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends desktop-file-utils; } >/dev/null
fi
if command -v desktop-file-validate >/dev/null; then
  check "desktop entry validates" desktop-file-validate "$root/usr/share/applications/org.tessera.Tessera.desktop"
else
  echo "check-deb: skip  desktop-file-validate (install desktop-file-utils)"
fi
if command -v appstreamcli >/dev/null; then
  if report="$(appstreamcli validate --no-net --no-color "$root/usr/share/metainfo/org.tessera.Tessera.metainfo.xml" 2>&1)"; then
    ok "AppStream metainfo validates"
  else
    bad "AppStream metainfo does not validate: $report"
  fi
else
  echo "check-deb: skip  appstreamcli validate (install appstream)"
fi
check "the metainfo's newest release is $version" \
  grep -q "<release version=\"$version\"" "$root/usr/share/metainfo/org.tessera.Tessera.metainfo.xml"
manual="$(zcat "$root/usr/share/man/man1/tessera.1.gz")"
for section in NAME SYNOPSIS DESCRIPTION COMMANDS; do
  grep -q "^\.SH $section" <<<"$manual" || bad "the man page has no $section section"
done
for command in gui inspect merge test diff split; do
  grep -q "^\.SS \"tessera $command\"" <<<"$manual" || bad "the man page does not describe 'tessera $command'"
done
ok "the man page has its sections and every command"
if command -v groff >/dev/null; then
  warnings="$(groff -k -man -Tutf8 -ww -z <<<"$manual" 2>&1 || true)"
  if [ -n "$warnings" ]; then bad "groff warns about the man page: $warnings"; else ok "groff formats the man page without a warning"; fi
fi
check "the completion is valid bash" bash -n "$root/usr/share/bash-completion/completions/tessera"

if [ "$failures" -gt 0 ]; then
  echo "check-deb: $failures check(s) failed for $deb" >&2
  exit 1
fi
echo "check-deb: $(basename "$deb") is complete"
