#!/usr/bin/env bash
# Installs the Tessera packages on a bare Debian 12 with apt, the way users would, and uses them:
#  1. tessera-cli alone, as on a cluster node: apt brings no GUI library; its version, its libraries (ldd), a merge
#     of the demo checkpoint in two parts started at once under a Slurm-like environment (--part auto) that equals a
#     single merge bit for bit and the reference model, --status, `gui` pointing to the package tessera, its man page
#     and tab completion;
#  2. then the workbench tessera, as on a desktop: the version, a merge and a test of the installed demo, an
#     offscreen screenshot of the workbench and of the welcome page, the desktop entry, the man page and tab
#     completion.
# Both times it checks that apt brought nothing for building and no libtorch.
#
# Usage: packaging/check-deb-install.sh TESSERA_CLI_DEB TESSERA_DEB [SCREENSHOTS_DIR]        (as root)
#
# The bare system is the one packaging/fresh-check.sh keeps (packaging/bare-debian.sh, bootstrapped here if
# missing); each run starts from a fresh copy of it (deb-run/). The screenshots are copied to SCREENSHOTS_DIR
# (default: the current folder). Takes a minute or two once the .debs apt downloads are cached. Environment: that
# of packaging/bare-debian.sh.
set -euo pipefail

say() { printf 'check-deb-install: %s\n' "$*"; }
fail() { printf 'check-deb-install: %s\n' "$*" >&2; exit 1; }

usage() { echo "usage: $0 TESSERA_CLI_DEB TESSERA_DEB [SCREENSHOTS_DIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ -f "$1" ] && [ -f "$2" ] || usage
[ "$(dpkg-deb -f "$1" Package)" = tessera-cli ] && [ "$(dpkg-deb -f "$2" Package)" = tessera ] || usage
repo="$(cd "$(dirname "$0")/.." && pwd)"
cli_deb="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
deb="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
shots="${3:-.}"
mkdir -p "$shots"
shots="$(cd "$shots" && pwd)"
version="$(dpkg-deb -f "$deb" Version)"

# shellcheck source=packaging/bare-debian.sh
. "$repo/packaging/bare-debian.sh"
bare_debian_base
say "fresh copy of the bare system in $scratch/deb-run"
bare_debian_copy deb-run
bare_env=(LANG=C.UTF-8)
run="$bare_run"
mkdir -p "$run/root/package"
cp "$cli_deb" "$deb" "$run/root/package/"
# A checkpoint for tessera-cli alone (the demo itself comes with the workbench package).
cp -a "$repo/resources/demo/fsdp2_llama_w4" "$run/root/demo"

step() { # step DESCRIPTION COMMAND: runs COMMAND in the bare system; its output goes to the log, shown on failure.
  local what="$1" log="$scratch/deb-install-step.log" started=$SECONDS
  if in_root "$2" >"$log" 2>&1; then
    say "ok    $what ($((SECONDS - started)) s)"
  else
    say "FAIL  $what; its output:"
    sed 's/^/    /' "$log" | tail -n 60
    exit 1
  fi
}

# apt_install FILE WHAT: apt-get installs the package FILE (from /root/package) on the system as it is; sets
# installed_now to what apt added (one package a line).
apt_install() {
  local file="$1" what="$2" before building
  before="$(in_root "dpkg-query -W -f='\${Package}\n'" | sort)"
  step "apt-get install ./$file $what" \
    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q /root/package/$file"
  installed_now="$(comm -13 <(printf '%s\n' "$before") <(in_root "dpkg-query -W -f='\${Package}\n'" | sort))"
  say "      apt added $(wc -l <<<"$installed_now") packages (list: $scratch/deb-install-packages-${file%%_*}.txt)"
  printf '%s\n' "$installed_now" >"$scratch/deb-install-packages-${file%%_*}.txt"
  building="$(grep -E -- '-dev$|^(g\+\+|gcc|cpp|cmake|ninja-build|make)(-[0-9]+)?$|torch|^libqt5' <<<"$installed_now" || true)"
  [ -z "$building" ] || fail "apt installed packages for building, libtorch or Qt 5: $(tr '\n' ' ' <<<"$building")"
  say "ok    nothing for building, no libtorch, no Qt 5 among them"
}

# Tab completion as an interactive bash has it: bash-completion loads /usr/share/bash-completion/completions/NAME
# on the first Tab after NAME (the line's first word).
complete_line() { # complete_line LINE: the words bash completes LINE's last word to
  in_root "source /usr/share/bash-completion/bash_completion
    COMP_LINE='$1'; COMP_POINT=\${#COMP_LINE}; read -ra COMP_WORDS <<<\"\$COMP_LINE\"
    [[ \"\$COMP_LINE\" == *' ' ]] && COMP_WORDS+=('')
    COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1))
    program=\${COMP_WORDS[0]}
    _completion_loader \$program; \$(complete -p \$program | sed -E 's/.* -F ([^ ]+) .*/\\1/') \$program \"\${COMP_WORDS[COMP_CWORD]}\" \"\${COMP_WORDS[COMP_CWORD-1]}\"
    printf '%s\n' \"\${COMPREPLY[@]}\""
}
expect_completion() { # expect_completion LINE WORD
  local got
  got="$(complete_line "$1")"
  if grep -qxF -- "$2" <<<"$got"; then say "ok    Tab after '$1' offers $2"; else
    fail "Tab after '$1' does not offer $2 (got: $(tr '\n' ' ' <<<"$got"))"; fi
}

# ---- tessera-cli alone, as on a cluster node ----------------------------------------------------------------------
apt_install "$(basename "$cli_deb")" "alone on a bare Debian 12"
gui="$(grep -E '^(libqt|libqcustomplot|libx11|libxcb|libgl([0-9]|x|es|dispatch|vnd|u)|libegl|libopengl|libwayland|libdbus|libfontconfig|libfreetype|tessera$)' <<<"$installed_now" || true)"
[ -z "$gui" ] || fail "installing tessera-cli brought GUI libraries: $(tr '\n' ' ' <<<"$gui")"
say "ok    no GUI library among them"
step "tessera-cli --version prints $version" "test \"\$(tessera-cli --version)\" = 'tessera-cli $version'"
step "tessera-cli finds every library it links, and none is a GUI library" \
  "ldd /usr/bin/tessera-cli | tee /tmp/ldd.txt && ! grep -q 'not found' /tmp/ldd.txt && ! grep -qiE 'libQt|qcustomplot|libX|libxcb|libGL|libEGL|wayland|dbus|fontconfig|freetype' /tmp/ldd.txt"
say "      ldd /usr/bin/tessera-cli: $(in_root "ldd /usr/bin/tessera-cli | awk '{ print \$1 }' | tr '\n' ' '")"
actor=/root/demo/global_step_10/actor
# Two processes at once, each told its part by the environment Slurm gives the tasks of `srun -n 2`.
step "tessera-cli merge --part auto: two parts at once under Slurm (SLURM_PROCID/SLURM_NTASKS)" \
  "cd /tmp && for k in 0 1; do SLURM_PROCID=\$k SLURM_NTASKS=2 tessera-cli merge --local_dir $actor --target_dir /tmp/parts --part auto >/tmp/part\$k.log 2>&1 & pids+=(\$!); done
   for pid in \${pids[@]}; do wait \$pid || { cat /tmp/part*.log; exit 1; }; done
   cat /tmp/part0.log /tmp/part1.log; grep -q 'All 2 parts are done' /tmp/part*.log && test -f /tmp/parts/model.safetensors"
step "the parts' model equals a single merge's, bit for bit" \
  "tessera-cli merge --local_dir $actor --target_dir /tmp/single --quiet && diff -r /tmp/single /tmp/parts"
step "tessera-cli merge --status says every part is done" \
  "tessera-cli merge --status /tmp/parts | tee /dev/stderr | grep -q 'No parts of a merge or split are under way'"
step "tessera-cli diff: the merged model equals the reference" "tessera-cli diff /tmp/parts /root/demo/reference"
step "tessera-cli test of the demo against its reference" \
  "tessera-cli test --local_dir $actor --test_hf_dir /root/demo/reference"
step "tessera-cli gui says the workbench is in the package tessera" \
  "out=\$(tessera-cli gui 2>&1); test \$? -eq 2 && grep -q 'in the package tessera' <<<\"\$out\""
step "man tessera-cli shows the page" \
  "MANPAGER=cat MANWIDTH=100 man tessera-cli >/tmp/man.txt 2>&1 && grep -q 'tessera-cli merge' /tmp/man.txt && grep -q -- '--part' /tmp/man.txt && ! grep -q 'warning' /tmp/man.txt"
expect_completion "tessera-cli me" merge
expect_completion "tessera-cli merge --pa" --part
expect_completion "tessera-cli merge --local_dir /root/de" /root/demo
say "tessera-cli works alone, without a GUI library"

# ---- the workbench, as on a desktop -----------------------------------------------------------------------------
apt_install "$(basename "$deb")" "beside it"
demo=/usr/share/tessera/demo/fsdp2_llama_w4
step "tessera --version prints $version" "test \"\$(tessera --version)\" = 'tessera $version'"
step "the executable finds every library it links" "! ldd /usr/bin/tessera | grep -q 'not found'"
step "tessera merge of the installed demo" \
  "cd /tmp && tessera merge --local_dir $demo/global_step_10/actor --target_dir /tmp/demo-merged --quiet && test -f /tmp/demo-merged/model.safetensors"
step "tessera test of the installed demo against its reference" \
  "tessera test --local_dir $demo/global_step_10/actor --test_hf_dir $demo/reference"
step "tessera gui DEMO --screenshot renders offscreen" \
  "QT_QPA_PLATFORM=offscreen tessera gui $demo/global_step_10/actor --screenshot /tmp/demo.png && test -s /tmp/demo.png"
step "tessera gui --screenshot renders the welcome page offscreen" \
  "QT_QPA_PLATFORM=offscreen tessera gui --screenshot /tmp/welcome.png && test -s /tmp/welcome.png"
cp "$run/tmp/demo.png" "$shots/installed-demo.png"
cp "$run/tmp/welcome.png" "$shots/installed-welcome.png"
say "      screenshots: $shots/installed-demo.png, $shots/installed-welcome.png"
step "tessera gui without a display says what to do instead of crashing" \
  "out=\$(tessera gui 2>&1); test \$? -eq 1 && grep -q 'no display' <<<\"\$out\""
if command -v desktop-file-validate >/dev/null; then
  if desktop-file-validate "$run/usr/share/applications/org.tessera.Tessera.desktop"; then
    say "ok    the installed desktop entry validates"
  else
    fail "the installed desktop entry does not validate"
  fi
else
  step "the installed desktop entry validates" \
    "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends desktop-file-utils && desktop-file-validate /usr/share/applications/org.tessera.Tessera.desktop"
fi
step "the desktop entry's icon is in the icon theme" \
  "test -f /usr/share/icons/hicolor/48x48/apps/org.tessera.Tessera.png && test -f /usr/share/icons/hicolor/scalable/apps/org.tessera.Tessera.svg"
step "man tessera shows the page" \
  "MANPAGER=cat MANWIDTH=100 man tessera >/tmp/man.txt 2>&1 && grep -q 'tessera merge' /tmp/man.txt && grep -q -- '--local_dir' /tmp/man.txt && ! grep -q 'warning' /tmp/man.txt"
expect_completion "tessera me" merge
expect_completion "tessera merge --lo" --local_dir
expect_completion "tessera merge --local_dir /usr/share/tessera/demo/fs" /usr/share/tessera/demo/fsdp2_llama_w4
expect_completion "tessera merge --backend " megatron
expect_completion "tessera split --format megatron-" megatron-dist
expect_completion "tessera merge --format gguf --outtype q4_k" q4_k_m
expect_completion "tessera inspect /usr/share/tessera/de" /usr/share/tessera/demo
say "both packages install on a bare Debian 12 and work"
