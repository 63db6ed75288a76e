# Sourced by the scripts that check Tessera on a bare Debian 12 (fresh-check.sh, check-deb-install.sh): a minimal
# system (debootstrap --variant=minbase bookworm) bootstrapped once and kept, and a fresh copy of it per run with
# /proc, /sys and /dev mounted, the host's resolver, and a download cache of .debs shared between runs.
#
# Environment:
#   TESSERA_FRESH_DIR      scratch folder (default /var/tmp/tessera-fresh): base/ is the kept bootstrap,
#                          apt-archives/ the downloaded .debs kept between runs (a download cache only: every
#                          package is still installed from scratch), and the runs' copies
#   TESSERA_DEBIAN_MIRROR  Debian mirror for debootstrap (default: the host's bookworm source, else deb.debian.org)
#   TESSERA_FRESH_KEEP=1   keep a run's copy afterwards, to look inside
#
# The sourcing script defines say() and fail() first.

scratch="${TESSERA_FRESH_DIR:-/var/tmp/tessera-fresh}"
base="$scratch/base"
archives="$scratch/apt-archives"

[ "$(id -u)" -eq 0 ] || fail "must run as root (debootstrap and chroot need it)"

# bare_debian_base: bootstraps base/ unless it is there (a few minutes, once).
bare_debian_base() {
  [ -x "$base/bin/bash" ] && return 0
  local mirror="${TESSERA_DEBIAN_MIRROR:-}"
  if [ -z "$mirror" ]; then
    mirror="$(grep -rhsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
      | grep -v security | grep -oE 'https?://[^ ]*debian/?' | head -n1 || true)"
    mirror="${mirror:-http://deb.debian.org/debian}"
  fi
  say "bootstrapping a bare Debian 12 (minbase) into $base from $mirror"
  command -v debootstrap >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
  } >/dev/null
  rm -rf "$base.tmp"
  mkdir -p "$scratch"
  debootstrap --variant=minbase bookworm "$base.tmp" "$mirror" >"$scratch/bootstrap.log" 2>&1 \
    || { tail -n 30 "$scratch/bootstrap.log" >&2; fail "debootstrap failed (log: $scratch/bootstrap.log)"; }
  rm -f "$base.tmp"/var/cache/apt/archives/*.deb
  mv "$base.tmp" "$base"
}

bare_run=""
bare_mounted=()
bare_debian_cleanup() {
  local i
  for ((i = ${#bare_mounted[@]} - 1; i >= 0; i--)); do umount -l "${bare_mounted[i]}" 2>/dev/null || true; done
  for ((i = ${#bare_mounted[@]} - 1; i >= 0; i--)); do
    # Never delete through a mount that is still there (/dev is the host's own).
    if mountpoint -q "${bare_mounted[i]}"; then say "left $bare_run in place: ${bare_mounted[i]} is still mounted"; return; fi
  done
  bare_mounted=()
  if [ "${TESSERA_FRESH_KEEP:-0}" != 1 ] && [ -n "$bare_run" ] && [ -d "$bare_run" ]; then
    rm -rf --one-file-system "$bare_run"
  fi
}
trap bare_debian_cleanup EXIT

# bare_debian_mount TARGET MOUNT-ARGS…: a mount inside the copy, undone at exit.
bare_debian_mount() {
  local target="$1"; shift
  mkdir -p "$target"
  mount "$@" "$target"
  bare_mounted+=("$target")
}

# bare_debian_copy NAME: a fresh copy of base/ in $scratch/NAME, ready to chroot into; sets bare_run.
bare_debian_copy() {
  bare_run="$scratch/$1"
  rm -rf --one-file-system "$bare_run"
  cp -a "$base" "$bare_run"
  mkdir -p "$archives/partial"
  cp -L /etc/resolv.conf "$bare_run/etc/resolv.conf" 2>/dev/null || true
  # dpkg skips its fsync of every unpacked file, as in Debian's own container images: the copy is thrown away after
  # the run, and unpacking libtorch's and Qt's thousands of headers goes several times faster.
  echo force-unsafe-io >"$bare_run/etc/dpkg/dpkg.cfg.d/tessera-unsafe-io"
  bare_debian_mount "$bare_run/proc" -t proc proc
  bare_debian_mount "$bare_run/sys" -t sysfs sysfs
  bare_debian_mount "$bare_run/dev" --bind /dev
  bare_debian_mount "$bare_run/dev/pts" --bind /dev/pts
  bare_debian_mount "$bare_run/var/cache/apt/archives" --bind "$archives"
}

# in_root COMMAND: runs COMMAND with bash as root in the copy, with a login-like environment and nothing inherited
# but the NAME=VALUE words in the array bare_env.
bare_env=()
in_root() {
  chroot "$bare_run" /usr/bin/env -i HOME=/root TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${bare_env[@]}" /bin/bash -c "$1"
}
