#!/usr/bin/env bash
# Runs the README's two set-up commands on a bare Debian 12, the way a new user meets them.
#
# Usage: packaging/fresh-check.sh [--debs OUT]        (as root)
#        packaging/fresh-check.sh --base-only         bootstraps the bare system if it is missing, and stops
#
# A minimal Debian 12 (debootstrap --variant=minbase bookworm) is bootstrapped once into a scratch folder and kept
# (packaging/bare-debian.sh); every run starts from a fresh copy of it, into which go the repository's committed
# tree (git archive HEAD) and ../shared beside it. The commands are read from the README's "Set-up" section itself,
# never copied here, so the README cannot drift from what is checked. A machine with more installed (make, a
# preinstalled -dev package) cannot hide a missing install step: nothing but minbase is there.
#
# --debs OUT: once both commands pass, the Debian packages are made in the same system from the build the commands
# made (packaging/build-deb.sh OUT build/dev: it has the packages' flags) and copied to OUT, so CI compiles the
# project once for both checks.
#
# Environment (and those of packaging/bare-debian.sh):
#   TESSERA_CCACHE_DIR     a ccache folder of the host to compile through (CI keeps one for warm runs): ccache, the
#                          one package added before the commands run, is installed in the copy and the commands
#                          run with CMAKE_CXX_COMPILER_LAUNCHER=ccache. It builds nothing itself, so it cannot
#                          hide a missing step, and its results are never trusted for correctness: a cold run
#                          without it must pass too.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"

say() { printf 'fresh-check: %s\n' "$*"; }
fail() { printf 'fresh-check: %s\n' "$*" >&2; exit 1; }

debs=""
base_only=0
case "${1:-}" in
  --debs) [ $# -eq 2 ] || fail "usage: $0 [--debs OUT | --base-only]"; mkdir -p "$2"; debs="$(cd "$2" && pwd)" ;;
  --base-only) base_only=1 ;;
  "") ;;
  *) fail "usage: $0 [--debs OUT | --base-only]" ;;
esac

# shellcheck source=packaging/bare-debian.sh
. "$repo/packaging/bare-debian.sh"

stage_started=0
stage_name=""
stage() {
  stage_end
  stage_name="$1"
  stage_started=$SECONDS
  say "$stage_name"
}
stage_end() {
  if [ -n "$stage_name" ]; then
    say "$stage_name: done in $((SECONDS - stage_started)) s"
    stage_name=""
  fi
}

if [ "$base_only" = 1 ]; then
  bare_debian_base
  exit 0
fi
[ -d "$shared" ] || fail "no shared folder at $shared (the tests read its fixtures)"
git -C "$repo" rev-parse --verify -q HEAD >/dev/null || fail "$repo is not a git checkout with a commit"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  say "note: uncommitted changes are not part of the check (it copies the committed tree, HEAD)"
fi

# The two commands: the ```sh blocks of the README's "## Set-up" section, in order (demo first, then tests).
mapfile -t commands < <(awk '
  /^## / { in_setup = ($0 ~ /^## Set-up/) ; next }
  in_setup && /^```sh$/ { in_block = 1; block = ""; next }
  in_setup && in_block && /^```$/ { in_block = 0; print block; next }
  in_setup && in_block { block = (block == "" ? $0 : block " " $0) }
' "$repo/README.md")
[ "${#commands[@]}" -eq 2 ] || fail "README.md's Set-up section should hold exactly two sh blocks, found ${#commands[@]}"

if [ ! -x "$base/bin/bash" ]; then
  stage "bootstrapping the bare Debian 12"
  bare_debian_base
else
  say "reusing the bare Debian 12 in $base"
fi

stage "fresh copy of the bare system with the committed tree and ../shared"
bare_debian_copy run
mkdir -p "$bare_run/root/work/tessera"
git -C "$repo" archive --format=tar HEAD | tar -x -C "$bare_run/root/work/tessera"
cp -a "$shared" "$bare_run/root/work/shared"
if [ -n "${TESSERA_CCACHE_DIR:-}" ]; then
  mkdir -p "$TESSERA_CCACHE_DIR"
  bare_debian_mount "$bare_run/var/cache/tessera-ccache" --bind "$TESSERA_CCACHE_DIR"
  # The package lists apt-get update fetched for it are removed again: the README's commands must fetch their own.
  in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ccache \
           && rm -rf /var/lib/apt/lists/*" >"$scratch/ccache-install.log" 2>&1 \
    || { tail -n 20 "$scratch/ccache-install.log" >&2; fail "could not install ccache in the copy"; }
  bare_env=(CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR=/var/cache/tessera-ccache)
  say "compiling through ccache ($TESSERA_CCACHE_DIR)"
fi
stage_end

# Runs one README command as root in the bare system with a login-like environment and nothing inherited.
run_command() {
  local label="$1" command="$2" log="$scratch/$1.log"
  stage "$label (README set-up command)"
  say "  \$ $command"
  if in_root "cd /root/work/tessera && $command" >"$log" 2>&1; then
    grep -E 'tests passed|tests failed' "$log" | sed 's/^/    /' || true
    tail -n 1 "$log" | sed 's/^/    /'
    stage_end
  else
    local status=$?
    say "$label FAILED (exit $status); the last lines of its output (whole log: $log):"
    tail -n 60 "$log" | sed 's/^/    /'
    exit 1
  fi
}

run_command demo "${commands[0]}"
run_command tests "${commands[1]}"
say "both README set-up commands pass on a bare Debian 12"

if [ -n "$debs" ]; then
  stage "the Debian packages, from the build the commands made"
  if ! in_root "cd /root/work/tessera && packaging/build-deb.sh /root/debs build/dev" >"$scratch/build-deb.log" 2>&1; then
    tail -n 40 "$scratch/build-deb.log" | sed 's/^/    /'
    fail "packaging/build-deb.sh failed in the bare system (log: $scratch/build-deb.log)"
  fi
  sed 's/^/    /' "$scratch/build-deb.log"
  cp "$bare_run"/root/debs/*.deb "$debs/"
  stage_end
fi
