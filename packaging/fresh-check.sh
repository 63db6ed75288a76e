#!/usr/bin/env bash
# Runs the README's two set-up commands on a bare Debian 12, the way a new user meets them.
#
# Usage: packaging/fresh-check.sh        (as root)
#
# A minimal Debian 12 (debootstrap --variant=minbase bookworm) is bootstrapped once into a scratch folder and kept;
# every run starts from a fresh copy of it, into which go the repository's committed tree (git archive HEAD) and
# ../shared beside it. The commands are read from the README's "Set-up" section itself, never copied here, so the
# README cannot drift from what is checked. A machine with more installed (make, a preinstalled -dev package)
# cannot hide a missing install step: nothing but minbase is there.
#
# Environment:
#   TESSERA_FRESH_DIR      scratch folder (default /var/tmp/tessera-fresh): base/ is the kept bootstrap,
#                          run/ the copy of this run, apt-archives/ the downloaded .debs kept between runs
#                          (a download cache only: every package is still installed from scratch)
#   TESSERA_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the host's bookworm source, else deb.debian.org)
#   TESSERA_FRESH_KEEP=1   keep run/ afterwards, to look inside
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
scratch="${TESSERA_FRESH_DIR:-/var/tmp/tessera-fresh}"
base="$scratch/base"
run="$scratch/run"
archives="$scratch/apt-archives"

say() { printf 'fresh-check: %s\n' "$*"; }
fail() { printf 'fresh-check: %s\n' "$*" >&2; exit 1; }

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

[ "$(id -u)" -eq 0 ] || fail "must run as root (debootstrap and chroot need it)"
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

mirror="${TESSERA_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(grep -rhsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
    | grep -v security | grep -oE 'https?://[^ ]*debian/?' | head -n1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    # Never delete through a mount that is still there (/dev is the host's own).
    if mountpoint -q "${mounted[i]}"; then say "left $run in place: ${mounted[i]} is still mounted"; return; fi
  done
  mounted=()
  if [ "${TESSERA_FRESH_KEEP:-0}" != 1 ] && [ -d "$run" ]; then rm -rf --one-file-system "$run"; fi
}
trap cleanup EXIT
mount_into() { # mount_into TARGET MOUNT-ARGS…
  local target="$1"; shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}

if [ ! -x "$base/bin/bash" ]; then
  stage "bootstrapping a bare Debian 12 (minbase) into $base from $mirror"
  command -v debootstrap >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
  } >/dev/null
  rm -rf "$base.tmp"
  mkdir -p "$scratch"
  debootstrap --variant=minbase bookworm "$base.tmp" "$mirror" >"$scratch/bootstrap.log" 2>&1 \
    || { tail -n 30 "$scratch/bootstrap.log" >&2; fail "debootstrap failed (log: $scratch/bootstrap.log)"; }
  apt-get -o Dir="$base.tmp" clean 2>/dev/null || rm -f "$base.tmp"/var/cache/apt/archives/*.deb
  mv "$base.tmp" "$base"
else
  say "reusing the bare Debian 12 in $base"
fi

stage "fresh copy of the bare system with the committed tree and ../shared"
rm -rf --one-file-system "$run"
cp -a "$base" "$run"
mkdir -p "$run/root/work/tessera" "$archives/partial"
git -C "$repo" archive --format=tar HEAD | tar -x -C "$run/root/work/tessera"
cp -a "$shared" "$run/root/work/shared"
cp -L /etc/resolv.conf "$run/etc/resolv.conf" 2>/dev/null || true
mount_into "$run/proc" -t proc proc
mount_into "$run/sys" -t sysfs sysfs
mount_into "$run/dev" --bind /dev
mount_into "$run/dev/pts" --bind /dev/pts
mount_into "$run/var/cache/apt/archives" --bind "$archives"
stage_end

# Runs one README command as root in the bare system with a login-like environment and nothing inherited.
run_command() {
  local label="$1" command="$2" log="$scratch/$1.log"
  stage "$label (README set-up command)"
  say "  \$ $command"
  if chroot "$run" /usr/bin/env -i HOME=/root TERM=dumb \
       PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
       /bin/bash -c "cd /root/work/tessera && $command" >"$log" 2>&1; then
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
