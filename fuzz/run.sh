#!/usr/bin/env bash
# fuzz/run.sh SECONDS [TARGET…]: builds the fuzz targets of the `sanitize` preset if needed and runs every libFuzzer
# target (or the named ones) for SECONDS each under AddressSanitizer + UndefinedBehaviorSanitizer, one after the
# other (the preset's build also holds the core's tests: CI compiles the core once for both). Each target starts
# from a scratch copy of its seed corpus (fuzz/corpus/<target>, never grown by a run) with its dictionary
# (fuzz/dict/<target>.dict). `fuzz/run.sh --list` prints the targets' names. Prints per target the executions, coverage (cov: edges, ft: features) and findings;
# exits 1 on any crash, leak, timeout or out-of-memory, and names the saved input that caused it.
#
# Environment: FUZZ_JOBS=N runs N targets at once (default 1); FUZZ_OUT=DIR keeps logs and findings there
# (default a fresh folder under /tmp); FUZZ_NICE=N runs the targets under `nice -n N` (default 0).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

all_targets=(unpickler zip torch_save safetensors_header safetensors_index dcp_metadata megatron_dist model_config
             mapping_rules regex byte_size gguf sentencepiece)
if [[ "${1:-}" == --list ]]; then
  printf '%s\n' "${all_targets[@]}"
  exit 0
fi
if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: fuzz/run.sh SECONDS [TARGET…]" >&2
  exit 2
fi
seconds="$1"
shift

# The fuzz toolchain is not part of the README's set-up (packaging/install-deps.sh installs the rest the preset
# needs); install it only here, and only when missing.
if ! command -v clang++-16 >/dev/null || [[ ! -e /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "fuzz/run.sh: clang-16 and libclang-rt-16-dev are missing; run as root to install them" >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-16 libclang-rt-16-dev >/dev/null
fi

targets=("${all_targets[@]}")
[[ $# -gt 0 ]] && targets=("$@")

# Configure once; Ninja makes rebuilding an up-to-date tree nearly free.
[[ -f build/sanitize/build.ninja ]] || cmake --preset sanitize >/dev/null
fuzzers=("${targets[@]/#/fuzz_}")
cmake --build --preset sanitize -j 2 --target "${fuzzers[@]}" >/dev/null \
  || { cmake --build --preset sanitize -j 1 --target "${fuzzers[@]}"; exit 1; }

# -max_len per format: large enough for the seeds (a real rank file is ~140 kB), small enough to stay fast.
max_len() {
  case "$1" in
    torch_save) echo 262144 ;;
    unpickler | zip | dcp_metadata | safetensors_header) echo 65536 ;;
    megatron_dist | mapping_rules | model_config | safetensors_index) echo 16384 ;;
    regex) echo 8192 ;;
    byte_size) echo 64 ;;
    gguf | sentencepiece) echo 65536 ;;
  esac
}

out="${FUZZ_OUT:-$(mktemp -d /tmp/tessera-fuzz-run.XXXXXX)}"
mkdir -p "$out"
echo "fuzz: ${#targets[@]} targets, $seconds s each; logs and findings in $out"

run_one() { # run_one TARGET: fuzzes it, writes $out/TARGET.log and $out/TARGET.status
  local target="$1" work="$out/$1"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/findings"
  cp -r "fuzz/corpus/$target/." "$work/corpus/"
  local status=0
  # -timeout: one input may take 10 s; -rss_limit_mb and -malloc_limit_mb: a hostile input may not take 2 GB.
  ( cd "$work" && nice -n "${FUZZ_NICE:-0}" "$root/build/sanitize/fuzz/fuzz_$target" corpus \
      -dict="$root/fuzz/dict/$target.dict" -max_len="$(max_len "$target")" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/findings/" >"$out/$target.log" 2>&1 ) || status=$?
  echo "$status" >"$out/$target.status"
}

pids=()
for target in "${targets[@]}"; do
  [[ -d "fuzz/corpus/$target" ]] || { echo "fuzz: no such target: $target" >&2; exit 2; }
  run_one "$target" &
  pids+=($!)
  while (( $(jobs -rp | wc -l) >= ${FUZZ_JOBS:-1} )); do wait -n || true; done
done
wait || true

failed=0
printf 'fuzz: %-20s %12s %8s %8s %8s  %s\n' target execs exec/s cov ft findings
for target in "${targets[@]}"; do
  log="$out/$target.log"
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
  # A target that died at once printed no coverage line; grep's "no match" must not end the report.
  cov=$({ grep -oE 'cov: [0-9]+' "$log" || true; } | tail -1 | cut -d' ' -f2)
  ft=$({ grep -oE 'ft: [0-9]+' "$log" || true; } | tail -1 | cut -d' ' -f2)
  # libFuzzer also saves inputs that were merely slow (slow-unit-*): worth a look, but not a failure, since a
  # loaded machine makes them; a real hang is a timeout-* finding.
  findings=$(find "$out/$target/findings" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$out/$target/findings" -type f -name 'slow-unit-*' | wc -l)
  status=$(cat "$out/$target.status")
  printf 'fuzz: %-20s %12s %8s %8s %8s  %s\n' "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$findings"
  if [[ "$slow" != 0 ]]; then
    echo "fuzz:   note: $slow slow input(s) (not failures), e.g. $(find "$out/$target/findings" -name 'slow-unit-*' | head -1)"
  fi
  if [[ "$status" != 0 || "$findings" != 0 ]]; then
    failed=1
    echo "fuzz: $target FAILED (exit $status); its log is $log"
    { grep -E '^==[0-9]+==ERROR|SUMMARY:|runtime error|ERROR: libFuzzer' "$log" || true; } | head -5 | sed 's/^/fuzz:   /'
    find "$out/$target/findings" -type f ! -name 'slow-unit-*' | sed 's/^/fuzz:   input: /'
    echo "fuzz:   reproduce: build/sanitize/fuzz/fuzz_$target INPUT; once fixed, add INPUT to tests/fuzz_regressions/$target/"
  fi
done
exit "$failed"
