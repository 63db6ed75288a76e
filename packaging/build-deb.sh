#!/usr/bin/env bash
# Builds the release Debian packages of Tessera, two from one build:
#   OUT/tessera-cli_<version>_<arch>.deb   the headless command line (no GUI library), for cluster nodes
#   OUT/tessera_<version>_<arch>.deb       the workbench, which depends on tessera-cli of the same version
#
# Usage: packaging/build-deb.sh OUT        (Debian 12 with the build dependencies: packaging/install-deps.sh)
#
# A Release build in build/package (only the two executables, the icons, the man pages and the completions: no
# tests, benchmarks or fuzzers), installed under /usr by CPack's DEB generator from the CMake install rules, one
# component per package (cmake/TesseraPackaging.cmake). The run-time dependencies are Debian package names found
# by dpkg-shlibdeps from the libraries each package's executable links. ccache is used when present.
#
# Environment:
#   TESSERA_PACKAGE_BUILD_DIR   build folder (default: build/package in the repository)
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
build="${TESSERA_PACKAGE_BUILD_DIR:-$repo/build/package}"

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

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
say "configuring a Release build in $build"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON "${launcher[@]}" >/dev/null
say "building tessera-cli, tessera and their desktop files, man pages and completions"
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
