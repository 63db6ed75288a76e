#!/usr/bin/env bash
# Makes this machine cold for CI, so that a run of .ci/run can be timed as a new machine meets it:
#   - the caches .ci/run keeps are removed: the bare Debian 12 and its downloaded .debs (/var/tmp/tessera-fresh),
#     node-llama-cpp (/var/tmp/tessera-node-llama), the compiler cache (/var/tmp/tessera-ccache), and this
#     checkout's build/ folder;
#   - the packages CI's scripts install are purged, with whatever they alone brought in (the packages apt would
#     autoremove afterwards and not before): the build dependencies packaging/install-deps.sh lists, clang-16 and
#     its runtime (the sanitize preset), ccache, debootstrap, desktop-file-utils, and Debian's nodejs and npm when
#     CI installed them.
# What a new machine of this kind already has stays: its compiler, CMake, Ninja, pkg-config, strace, file,
# dpkg-dev, libgl-dev, Python 3 and its own Node.js 20 (node-llama-cpp needs Node.js 20, which Debian 12 does not
# package, so a machine without it could not run the llama.cpp checks at all).
#
# Usage: packaging/ci-cold.sh        (as root; asks nothing)
# Then: time .ci/run
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
say() { printf 'ci-cold: %s\n' "$*"; }
[ "$(id -u)" -eq 0 ] || { echo "ci-cold: must run as root (it purges packages)" >&2; exit 1; }

# The folders CI keeps between runs. A bare-Debian copy may still have /proc or /dev mounted if a run was killed:
# unmount everything below first, and never delete through a mount.
for folder in "${TESSERA_FRESH_DIR:-/var/tmp/tessera-fresh}" /var/tmp/tessera-node-llama \
              "${TESSERA_CCACHE_DIR:-/var/tmp/tessera-ccache}" "$repo/build"; do
  [ -e "$folder" ] || continue
  { findmnt -rn -o TARGET | grep -F "$folder/" || true; } | sort -r | while read -r mount; do umount -l "$mount" || true; done
  say "removing $folder"
  rm -rf --one-file-system "$folder"
done

# The machine's own toolchain, which install-deps.sh also names (it installs only what is missing).
image_has=(cmake ninja-build g++ pkg-config libgl-dev strace file dpkg-dev python3)
candidates=($("$repo/packaging/install-deps.sh" --list) clang-16 libclang-rt-16-dev ccache debootstrap
            desktop-file-utils)
# Debian's own nodejs (18.x) and npm are what CI installs when a machine lacks Node.js; a NodeSource build is the
# machine's.
if dpkg-query -W -f='${Version}' nodejs 2>/dev/null | grep -q 'deb12\|dfsg'; then candidates+=(nodejs npm); fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
purge=()
for pkg in "${candidates[@]}"; do
  printf '%s\n' "${image_has[@]}" | grep -qxF "$pkg" && continue
  installed "$pkg" && purge+=("$pkg")
done

orphans() { apt-get -s autoremove 2>/dev/null | sed -nE 's/^Remv ([^ ]+) .*/\1/p' | sort; }
if [ ${#purge[@]} -gt 0 ]; then
  orphans_before="$(orphans)"
  say "purging ${purge[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${purge[@]}" >/dev/null
  mapfile -t brought < <(comm -13 <(printf '%s\n' "$orphans_before") <(orphans))
  if [ ${#brought[@]} -gt 0 ]; then
    say "purging the ${#brought[@]} packages they brought in"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${brought[@]}" >/dev/null
  fi
else
  say "none of the packages CI installs is present"
fi
apt-get clean
say "cold: time .ci/run now"
