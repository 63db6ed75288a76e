#!/usr/bin/env bash
# Installs the Debian 12 packages Tessera needs to build and test, when they are missing.
# Usage: packaging/install-deps.sh        (as root, or with sudo available)
#        packaging/install-deps.sh --list  prints the packages, one a line, and installs nothing
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  mold                 # tests only: links the test programs several times faster than GNU ld
  qt6-base-dev qt6-svg-dev libgl-dev
  libtorch-dev
  libqcustomplot-dev
  nlohmann-json3-dev
  libre2-dev           # the core's regex engine (the package then depends on its run-time library, libre2-9)
  openmpi-bin          # tests only: tst_parts starts merge parts with mpirun -n 3 (--part auto)
  strace               # tests only: tst_crash_points kills every publishing path at its system calls
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all build dependencies are present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: missing ${missing[*]}; run this script as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
