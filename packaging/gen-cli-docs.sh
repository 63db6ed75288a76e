#!/usr/bin/env bash
# Writes the man page and the bash completion of a Tessera executable (the headless `tessera-cli` or the workbench
# `tessera`) from its own --help texts, so neither can drift from the program: every command, option, argument and
# description in them is what `PROGRAM … --help` prints.
#
# Usage: packaging/gen-cli-docs.sh EXECUTABLE OUTDIR
#   EXECUTABLE  the built tessera-cli or tessera (run only with --help and --version: no display, no files); the
#               program's name is the first word of its --version
#   OUTDIR      receives NAME.1 (roff) and NAME.bash-completion
set -euo pipefail
# Under pipefail, an awk that exits before reading all its input fails the pipeline at random: the writer gets
# SIGPIPE when the help is longer than one pipe write (merge's and split's are). Every awk here reads to the end.

[ $# -eq 2 ] || { echo "usage: $0 EXECUTABLE OUTDIR" >&2; exit 2; }
tessera="$1"
out="$2"
mkdir -p "$out"

read -r name version < <("$tessera" --version)
[ -n "${version:-}" ] || { echo "gen-cli-docs: '$tessera --version' printed no version" >&2; exit 1; }
[[ "$name" =~ ^tessera(-cli)?$ ]] || { echo "gen-cli-docs: '$tessera --version' names no Tessera program ($name)" >&2; exit 1; }
# The completion's shell functions and tables, one set per program (bash may load both).
ident="_${name//-/_}"
main_help="$("$tessera" --help)"
# The commands: the first word of each line of the "commands:" block. The workbench is the program with `gui`.
mapfile -t commands < <(printf '%s\n' "$main_help" | awk '
  /^commands:/ && !done { on = 1; next }
  on && /^$/ { on = 0; done = 1 }
  on { print $1 }')
[ "${#commands[@]}" -gt 0 ] || { echo "gen-cli-docs: no commands in '$tessera --help'" >&2; exit 1; }
workbench=0
[[ " ${commands[*]} " == *" gui "* ]] && workbench=1
declare -A help
for command in "${commands[@]}"; do
  help[$command]="$("$tessera" "$command" --help)"
done

# ---- man page ---------------------------------------------------------------------------------------------------

# roff_help: one --help text (stdin) as man page paragraphs. "usage:" lines become a synopsis, "name:" headers bold
# labels, two-column entries (flag or argument, then its help; long flags have their help on the next lines) .TP
# items, and the rest paragraphs.
roff_help() {
  awk '
    # Backslashes escaped, every "-" a minus sign (so options copy and paste), no line starting a request.
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); if (s ~ /^[.'"'"']/) s = "\\&" s; return s }
    # "--flag META", "PATH" or "diff A B": flags and command names bold, values italic.
    function term(s,   n, parts, i, r) {
      n = split(s, parts, " ")
      r = ""
      for (i = 1; i <= n; i++) {
        if (parts[i] ~ /^-/ || parts[i] ~ /^[a-z]/) r = r (i > 1 ? " " : "") "\\fB" esc(parts[i]) "\\fR"
        else r = r (i > 1 ? " " : "") "\\fI" esc(parts[i]) "\\fR"
      }
      return r
    }
    function flush() { if (para != "") { print ".PP"; print para; para = "" } }
    /^usage: / { sub(/^usage: /, ""); print ".PP"; print ".nf"; print "\\fB" $1 " " $2 "\\fR" esc(substr($0, length($1 " " $2) + 1)); print ".fi"; next }
    /^[A-Za-z][A-Za-z ]*:$/ { flush(); print ".PP"; print "\\fB" toupper(substr($0, 1, 1)) substr($0, 2, length($0) - 2) "\\fR"; in_list = 1; next }
    /^$/ { flush(); in_list = 0; next }
    in_list && /^                          / { sub(/^ +/, ""); print esc($0); next }
    in_list && /^  [^ ]/ {
      line = substr($0, 3)
      split_at = match(line, /  +/)
      if (split_at) { t = substr(line, 1, split_at - 1); rest = substr(line, split_at + RLENGTH) }
      else { t = line; rest = "" }
      print ".TP"; print term(t)
      if (rest != "") print esc(rest)
      next
    }
    { para = para (para == "" ? "" : "\n") esc($0) }
    END { flush() }'
}

description="$(printf '%s\n' "$main_help" | awk 'NR > 2 && /^$/ { done = 1 } NR > 2 && !done { print }')"
roff_name="${name//-/\\-}"
# The workbench's page ends with the demo it ships and its settings; tessera-cli's with a merge across a cluster.
man_workbench_tail() {
  echo ".SH FILES"
  echo ".TP"
  echo ".I /usr/share/tessera/demo/"
  echo "The demo checkpoint (a verl FSDP2 run of 4 ranks) and the reference model it merges into."
  echo ".TP"
  echo ".I ~/.config/Tessera/Tessera.conf"
  echo "The workbench's settings: recent folders, window layout, colours."
  echo ".SH EXAMPLES"
  echo "Merge the demo checkpoint, then check the merge against its reference:"
  echo ".PP"
  echo ".nf"
  echo ".RS"
  echo "tessera merge \\-\\-local_dir /usr/share/tessera/demo/fsdp2_llama_w4/global_step_10/actor \\-\\-target_dir demo\\-merged"
  echo "tessera test \\-\\-local_dir /usr/share/tessera/demo/fsdp2_llama_w4/global_step_10/actor \\e"
  echo "    \\-\\-test_hf_dir /usr/share/tessera/demo/fsdp2_llama_w4/reference"
  echo ".RE"
  echo ".fi"
  echo ".SH SEE ALSO"
  echo ".BR tessera\\-cli (1):"
  echo "the same commands without the workbench, for machines without a desktop (package tessera\\-cli)."
}
man_cli_tail() {
  echo ".SH EXAMPLES"
  echo "Merge a checkpoint into a Hugging Face folder, then check the merge against a reference model:"
  echo ".PP"
  echo ".nf"
  echo ".RS"
  echo "tessera\\-cli merge \\-\\-local_dir run/global_step_5000/actor \\-\\-target_dir step5000"
  echo "tessera\\-cli test \\-\\-local_dir run/global_step_5000/actor \\-\\-test_hf_dir reference"
  echo ".RE"
  echo ".fi"
  echo ".PP"
  echo "Merge across 16 Slurm array tasks (each writes its part, the last one to finish publishes the model), then"
  echo "see which parts are done:"
  echo ".PP"
  echo ".nf"
  echo ".RS"
  echo "sbatch \\-\\-array=0\\-15 \\-\\-wrap 'tessera\\-cli merge \\-\\-local_dir /lustre/run/global_step_5000/actor \\e"
  echo "    \\-\\-target_dir /lustre/models/step5000 \\-\\-part auto \\-\\-quiet'"
  echo "tessera\\-cli merge \\-\\-status /lustre/models/step5000"
  echo ".RE"
  echo ".fi"
  echo ".SH SEE ALSO"
  echo ".BR tessera (1):"
  echo "the workbench, which runs the same commands and shows a checkpoint's tensors, placements and diffs"
  echo "(package tessera)."
}
{
  echo ".\\\" Generated by packaging/gen-cli-docs.sh from '$name --help' and every '$name COMMAND --help'."
  echo ".TH ${roff_name^^} 1 \"\" \"$roff_name $version\" \"User Commands\""
  echo ".nh"   # no hyphenation: paths and flags stay whole
  echo ".ad l"
  echo ".SH NAME"
  if [ "$workbench" = 1 ]; then
    echo "$roff_name \\- distributed training checkpoints to Hugging Face models, and back (workbench)"
  else
    echo "$roff_name \\- distributed training checkpoints to Hugging Face models, and back (command line)"
  fi
  echo ".SH SYNOPSIS"
  echo ".nf"
  for command in "${commands[@]}"; do
    printf '%s\n' "${help[$command]}" | awk -v program="$name" -v shown="$roff_name" 'NR == 1 {
      sub("^usage: " program " ", ""); rest = substr($0, length($1) + 1); gsub(/\\/, "\\e", rest); gsub(/-/, "\\-", rest)
      print "\\fB" shown " " $1 "\\fR" rest }'
  done
  echo ".fi"
  echo ".SH DESCRIPTION"
  printf '%s\n' "$description" | sed 's/-/\\-/g; s/^\([.'"'"']\)/\\\&\1/'
  printf '%s\n' "$main_help" | awk '/^commands:/ && !done { on = 1; print "commands:"; next } on && /^$/ { on = 0; done = 1 } on' | roff_help
  printf '%s\n' "$main_help" | awk '/^options:/ { on = 1 } on' | roff_help
  echo ".SH COMMANDS"
  for command in "${commands[@]}"; do
    echo ".SS \"$roff_name $command\""
    printf '%s\n' "${help[$command]}" | roff_help
  done
  if [ "$workbench" = 1 ]; then man_workbench_tail; else man_cli_tail; fi
} >"$out/$name.1.tmp"
mv "$out/$name.1.tmp" "$out/$name.1"

# ---- bash completion --------------------------------------------------------------------------------------------

# Per command: its flags; the flags that take a folder, a file or nothing completable; the choices an option
# lists at the start of its help ("auto, fsdp, dcp or megatron: …").
completion_data() {
  local command="$1"
  printf '%s\n' "${help[$command]}" | awk -v cmd="$command" -v ident="$ident" '
    /^options:/ { on = 1; next }
    on && /^$/ { on = 0 }
    on && /^  --/ {
      line = substr($0, 3)
      n = match(line, /  +/)
      t = n ? substr(line, 1, n - 1) : line
      h = n ? substr(line, n + RLENGTH) : ""
      split(t, parts, " ")
      f = parts[1]; meta = parts[2]
      flags = flags " " f
      if (meta ~ /^(DIR|PATH)$/) dirs = dirs " " f
      else if (meta ~ /^FILE/) files = files " " f
      else if (meta != "") {
        values = values " " f
        # "a, b or c", maybe after "what: ", each maybe with "(what it means)".
        item = "[a-z0-9][a-z0-9_-]*( \\([^)]*\\))?"
        list = "^(" item ", )*" item " or " item "([:;,]| \\(default|$)"
        if (!match(h, list)) sub(/^[^:(]*: /, "", h)
        if (match(h, list)) {
          c = substr(h, 1, RLENGTH); sub(/ \(default$/, "", c); gsub(/ \([^)]*\)/, "", c)
          sub(/[:;,]$/, "", c); gsub(/,/, " ", c); gsub(/ or /, " ", c); gsub(/ +/, " ", c)
          choices = choices sprintf("    %s:%s) words=\"%s\" ;;\n", cmd, f, c)
        }
      }
    }
    END {
      printf "  %s_flags[%s]=\"%s\"\n", ident, cmd, substr(flags, 2)
      printf "  %s_dirs[%s]=\"%s\"\n", ident, cmd, substr(dirs, 2)
      printf "  %s_files[%s]=\"%s\"\n", ident, cmd, substr(files, 2)
      printf "  %s_values[%s]=\"%s\"\n", ident, cmd, substr(values, 2)
      printf "%s", choices > "/dev/stderr"
    }'
}

tables=""
choices=""
for command in "${commands[@]}"; do
  tables+="$(completion_data "$command" 2>/dev/null)"$'\n'
  listed="$(completion_data "$command" 2>&1 >/dev/null)"
  [ -z "$listed" ] || choices+="$listed"$'\n'
done

cat >"$out/$name.bash-completion.tmp" <<EOF
# bash completion for $name $version
# Generated by packaging/gen-cli-docs.sh from '$name --help' and every '$name COMMAND --help'.

${ident}_tables() {
  declare -gA ${ident}_flags ${ident}_dirs ${ident}_files ${ident}_values
$tables}

# ${ident}_choices COMMAND FLAG: the values an option takes, when its help lists them.
${ident}_choices() {
  local words=""
  case "\$1:\$2" in
$choices    *) ;;
  esac
  printf '%s' "\$words"
}

${ident}() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -s || return
  else
    cur="\${COMP_WORDS[COMP_CWORD]}"; prev="\${COMP_WORDS[COMP_CWORD-1]}"; words=("\${COMP_WORDS[@]}"); cword=\$COMP_CWORD
  fi
  [ -n "\${${ident}_flags[*]+set}" ] || ${ident}_tables

  if [ "\$cword" -eq 1 ]; then
    mapfile -t COMPREPLY < <(compgen -W "${commands[*]} --help --version" -- "\$cur")
    return
  fi
  local command="\${words[1]}"
  [ -n "\${${ident}_flags[\$command]+set}" ] || return
  # Flags are accepted with dashes too; look the underscore spelling up.
  local option="\${prev//-/_}"
  option="--\${option#__}"
  if [[ " \${${ident}_dirs[\$command]} " == *" \$option "* ]]; then
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -d -- "\$cur")
    return
  fi
  if [[ " \${${ident}_files[\$command]} " == *" \$option "* ]]; then
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "\$cur")
    return
  fi
  if [[ " \${${ident}_values[\$command]} " == *" \$option "* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "\$(${ident}_choices "\$command" "\$option")" -- "\$cur")
    return
  fi
  if [[ "\$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "\${${ident}_flags[\$command]} --help" -- "\$cur")
    return
  fi
  # Positional arguments are checkpoints: folders or files.
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -f -- "\$cur")
}
complete -F ${ident} $name
EOF
mv "$out/$name.bash-completion.tmp" "$out/$name.bash-completion"
