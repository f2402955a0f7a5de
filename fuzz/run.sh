#!/usr/bin/env bash
# Coverage-guided fuzzing of the ingest adapters with AFL++ through cargo-afl (stable
# toolchain): every adapter, fed files AFL mutates from the small real files in seeds/parse.
#
# Usage: fuzz/run.sh [SECONDS]   (default 600)
# Installs cargo-afl once into ~/.cache/asof-tools (it builds its AFL++ runtime there), builds
# the instrumented target into ~/.cache/asof-afl-target (DataFusion included: the first build
# takes a while), fuzzes for SECONDS, prints AFL's counts, and copies any crashing input to
# fuzz/crashes/ (exit 1): each becomes a regression case of ingest/src/sources/robustness.rs.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
tools="${ASOF_TOOLS:-$HOME/.cache/asof-tools}"
export PATH="$tools/bin:$PATH"
command -v cargo-afl >/dev/null || cargo install --quiet cargo-afl --root "$tools"
export CARGO_TARGET_DIR="${ASOF_AFL_TARGET:-$HOME/.cache/asof-afl-target}"
cargo afl build --release --bin parse
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo afl fuzz -V "$secs" -i seeds/parse -o "$out" "$CARGO_TARGET_DIR/release/parse" >"$out/afl.log" 2>&1 || {
  tail -20 "$out/afl.log"; exit 2; }
stats="$out/default/fuzzer_stats"
grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|bitmap_cvg)' "$stats"
shopt -s nullglob
crashes=("$out"/default/crashes/id:*)
if [ ${#crashes[@]} -gt 0 ]; then
  mkdir -p crashes
  cp "${crashes[@]}" crashes/
  echo "${#crashes[@]} crashing input(s) copied to fuzz/crashes/"
  exit 1
fi
echo "no crash in ${secs}s"
