#!/usr/bin/env bash
# Checks the two built Tessera packages without installing them:
#   tessera-cli  the headless command line: its files, and that neither its declared dependencies nor the libraries
#                its executable loads include a GUI library (no Qt at all, QCustomPlot, X11, OpenGL, D-Bus);
#   tessera      the workbench: its files, its dependencies (Qt 6 run-time libraries, QCustomPlot, RE2, and
#                tessera-cli of the same version), the desktop entry and AppStream metadata;
# and for both: nothing for building and no libtorch in the dependencies, the version the executable prints, a man
# page with every command that groff formats cleanly, a valid completion, and no file in both packages.
#
# Usage: packaging/check-deb.sh DEB DEB        (tessera-cli_*.deb and tessera_*.deb, in either order)
# Quick (seconds): CI runs it after packaging/build-deb.sh. packaging/check-deb-install.sh installs the packages on
# a bare Debian 12 and uses them.
set -euo pipefail

usage() { echo "usage: $0 TESSERA_CLI_DEB TESSERA_DEB" >&2; exit 2; }
[ $# -eq 2 ] && [ -f "$1" ] && [ -f "$2" ] || usage
declare -A debs
for deb in "$@"; do
  debs[$(dpkg-deb -f "$deb" Package)]="$deb"
done
[ -n "${debs[tessera-cli]:-}" ] && [ -n "${debs[tessera]:-}" ] || usage
repo="$(cd "$(dirname "$0")/.." && pwd)"
failures=0
ok() { printf 'check-deb: ok    %s\n' "$*"; }
bad() { printf 'check-deb: FAIL  %s\n' "$*" >&2; failures=$((failures + 1)); }
check() { # check DESCRIPTION COMMAND…
  local what="$1"; shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
roots="$(mktemp -d)"
trap 'rm -rf "$roots"' EXIT

version="$(dpkg-deb -f "${debs[tessera]}" Version)"
check "both packages have version $version" test "$(dpkg-deb -f "${debs[tessera-cli]}" Version)" = "$version"
summary_cli="$(dpkg-deb -f "${debs[tessera-cli]}" Description | sed -n 1p)"
summary_workbench="$(dpkg-deb -f "${debs[tessera]}" Description | sed -n 1p)"
check "each package has its own summary ('$summary_cli', '$summary_workbench')" \
  test "$summary_cli" != "$summary_workbench" -a -n "$summary_cli" -a -n "$summary_workbench"

# contents PACKAGE: the paths of the package's files and folders, each starting with /.
contents() { dpkg-deb -c "${debs[$1]}" | awk '{ print $6 }' | sed 's|^\./|/|'; }

# check_files PACKAGE FILE…: the package holds these files and no other.
check_files() {
  local package="$1" listing file missing=0 extra
  shift
  listing="$(contents "$package")"
  for file in "$@"; do
    grep -qxF "$file" <<<"$listing" || { bad "$package: missing $file"; missing=$((missing + 1)); }
  done
  [ "$missing" -gt 0 ] || ok "$package: all $# files present"
  extra="$(grep -vE '/$' <<<"$listing" | grep -vxF -f <(printf '%s\n' "$@") || true)"
  if [ -n "$extra" ]; then bad "$package: files nobody asked for:"$'\n'"$extra"; else ok "$package: no other files"; fi
}

# check_program PACKAGE ROOT COMMAND…: the executable, its man page (with every COMMAND) and its completion.
check_program() {
  local package="$1" root="$2" roff="${1//-/\\-}" depends needed printed manual warnings command
  shift 2
  depends="$(dpkg-deb -f "${debs[$package]}" Depends)"
  if grep -qiE 'torch|-dev( |,|$)|cmake|g\+\+|ninja' <<<"$depends $(dpkg-deb -f "${debs[$package]}" Recommends)"; then
    bad "$package depends on something for building or on libtorch: $depends"
  else
    ok "$package: nothing for building, no libtorch"
  fi
  needed="$(objdump -p "$root/usr/bin/$package" | awk '/NEEDED/ { print $2 }')"
  if grep -qiE 'torch|c10' <<<"$needed"; then bad "$package links libtorch: $(tr '\n' ' ' <<<"$needed")"; else
    ok "$package does not link libtorch (NEEDED: $(tr '\n' ' ' <<<"$needed"))"; fi
  printed="$("$root/usr/bin/$package" --version 2>/dev/null || true)"
  check "$package --version prints the package version ($printed)" test "$printed" = "$package $version"
  manual="$(zcat "$root/usr/share/man/man1/$package.1.gz")"
  for section in NAME SYNOPSIS DESCRIPTION COMMANDS; do
    grep -q "^\.SH $section" <<<"$manual" || bad "$package's man page has no $section section"
  done
  for command in "$@"; do
    grep -qF ".SS \"$roff $command\"" <<<"$manual" || bad "$package's man page does not describe '$package $command'"
  done
  ok "$package's man page has its sections and every command ($*)"
  if command -v groff >/dev/null; then
    warnings="$(groff -k -man -Tutf8 -ww -z <<<"$manual" 2>&1 || true)"
    if [ -n "$warnings" ]; then bad "groff warns about $package's man page: $warnings"; else
      ok "groff formats $package's man page without a warning"; fi
  fi
  check "$package's completion is valid bash and completes $package" \
    bash -c 'bash -n "$1" && grep -q " $2\$" "$1"' _ "$root/usr/share/bash-completion/completions/$package" "$package"
}

for package in tessera-cli tessera; do
  mkdir -p "$roots/$package"
  dpkg-deb -x "${debs[$package]}" "$roots/$package"
done

# ---- tessera-cli ------------------------------------------------------------------------------------------------
check_files tessera-cli /usr/bin/tessera-cli /usr/share/man/man1/tessera-cli.1.gz \
  /usr/share/bash-completion/completions/tessera-cli /usr/share/doc/tessera-cli/copyright
depends="$(dpkg-deb -f "${debs[tessera-cli]}" Depends)"
# RE2's run-time package is named after its soname (libre2-9 on Debian 12).
for lib in libc6 'libstdc\+\+6' 'libre2-[0-9]+'; do
  grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || bad "tessera-cli's Depends lacks $lib: $depends"
done
gui='libqt|qcustomplot|libx11|libxcb|libgl([0-9]|x|es|dispatch|vnd|u)|libegl|libopengl|libwayland|libdbus|libfontconfig|libfreetype|tessera'
if grep -qiE "(^|, )($gui)" <<<"$depends"; then bad "tessera-cli depends on a GUI library: $depends"; else
  ok "tessera-cli depends on no GUI library: $depends"; fi
# What the loader would load, by the same rule as the test cli_links_no_gui.
if report="$(cmake -DEXECUTABLE="$roots/tessera-cli/usr/bin/tessera-cli" -P "$repo/cmake/CheckNoGuiLibraries.cmake" 2>&1)"; then
  ok "tessera-cli loads no GUI library (ldd: $(sed -n 's/.*loads no GUI library: //p' <<<"$report"))"
else
  bad "tessera-cli: $report"
fi
check_program tessera-cli "$roots/tessera-cli" inspect merge test diff split drift

# ---- tessera (the workbench) ------------------------------------------------------------------------------------
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
while IFS= read -r file; do
  required+=("/usr/share/tessera/demo/${file#resources/demo/}")
done < <(cd "$repo" && find resources/demo -type f | sort)
check_files tessera "${required[@]}"
depends="$(dpkg-deb -f "${debs[tessera]}" Depends)"
for lib in "tessera-cli \(= ${version//./\\.}\)" libqt6core6 libqt6gui6 libqt6widgets6 libqt6svg6 libqcustomplot2.1-qt6 \
  'libre2-[0-9]+'; do
  grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || bad "tessera's Depends lacks $lib: $depends"
done
ok "tessera: Depends: $depends"
root="$roots/tessera"
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
check_program tessera "$root" gui inspect merge test diff split drift

# ---- both -------------------------------------------------------------------------------------------------------
shared="$(comm -12 <(contents tessera-cli | grep -v '/$' | sort) <(contents tessera | grep -v '/$' | sort))"
if [ -n "$shared" ]; then bad "files in both packages (dpkg would refuse the second): $shared"; else
  ok "no file is in both packages"; fi

if [ "$failures" -gt 0 ]; then
  echo "check-deb: $failures check(s) failed for $(basename "${debs[tessera-cli]}") and $(basename "${debs[tessera]}")" >&2
  exit 1
fi
echo "check-deb: $(basename "${debs[tessera-cli]}") and $(basename "${debs[tessera]}") are complete"
