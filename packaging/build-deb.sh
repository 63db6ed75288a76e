#!/usr/bin/env bash
# Builds the Debian packages of Tessera, two from one build:
#   OUT/tessera-cli_<version>_<arch>.deb   the headless command line (no GUI library), for cluster nodes
#   OUT/tessera_<version>_<arch>.deb       the workbench, which depends on tessera-cli of the same version
#
# Usage: packaging/build-deb.sh OUT [BUILD]        (Debian 12 with the build dependencies: packaging/install-deps.sh)
#
# The packages hold the two executables, the icons, the man pages and the completions (no tests, benchmarks or
# fuzzers), installed under /usr by CPack's DEB generator from the CMake install rules, one component per package
# (cmake/TesseraPackaging.cmake), stripped. They are built with Debian's own package flags (-O2 and its hardening:
# the hidden preset debian-flags, which the dev and release presets inherit). BUILD is an existing build folder of
# either preset to package as it is, as CI packages the dev build the README's commands made
# (cmake/CheckPackageFlags.cmake refuses a folder configured otherwise); without it, the release preset is
# configured and built in build/release. The run-time dependencies are Debian package names found by
# dpkg-shlibdeps from the libraries each package's executable links.
set -euo pipefail

[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 OUT [BUILD]" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"

say() { printf 'build-deb: %s\n' "$*"; }

# CPack's DEB generator finds the executables with `file` and their dependencies with dpkg-shlibdeps (dpkg-dev).
missing=()
command -v file >/dev/null || missing+=(file)
command -v dpkg-shlibdeps >/dev/null || missing+=(dpkg-dev)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  say "installing ${missing[*]} (needed to make the package)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ $# -eq 2 ]; then
  build="$(cd "$2" && pwd)"
  cmake -DBUILD="$build" -DPRESETS="$repo/CMakePresets.json" -P "$repo/cmake/CheckPackageFlags.cmake"
else
  build="$repo/build/release"
  say "configuring the release preset in $build"
  (cd "$repo" && cmake --preset release >/dev/null)
fi
say "building tessera-cli, tessera and their desktop files, man pages and completions in $build"
cmake --build "$build" -j "${TESSERA_JOBS:-2}" --target tessera-cli tessera tessera_desktop_files
say "packaging"
rm -f "$build"/cpack/*.deb
(cd "$build" && cpack -G DEB -B "$build/cpack" >/dev/null)
for package in tessera-cli tessera; do
  debs=("$build/cpack/${package}_"*.deb)
  [ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || { echo "build-deb: cpack made no single ${package}_*.deb" >&2; exit 1; }
  cp "${debs[0]}" "$out/"
  deb="$out/$(basename "${debs[0]}")"
  say "$deb"
  dpkg-deb -f "$deb" Package Version Architecture Depends Recommends | sed 's/^/  /'
done
