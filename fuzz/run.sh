#!/usr/bin/env bash
# Coverage-guided fuzzing with AFL++ through cargo-afl (stable toolchain) of two targets:
#   parse   every ingest adapter, fed files AFL mutates from small real files (seeds/parse)
#   cursor  the cursor decoder behind its signature check (seeds/cursor)
#
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   (default 600 seconds each, both targets)
# Installs cargo-afl once into ~/.cache/asof-tools and its AFL++ runtime (~/.local/share/afl.rs),
# builds the instrumented targets into ~/.cache/asof-afl-target (dependencies the targets never
# execute are built unoptimised: about 24 min on 2 cores the first time), fuzzes each for
# SECONDS, prints AFL's counts, and copies any crashing or
# hanging input to fuzz/crashes/<target>/ (exit 1): each becomes a regression case
# (ingest/src/sources/robustness.rs replays fuzz/crashes/parse, cursor/src/lib.rs
# fuzz/crashes/cursor).
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse cursor)
tools="${ASOF_TOOLS:-$HOME/.cache/asof-tools}"
export PATH="$tools/bin:$PATH"
command -v cargo-afl >/dev/null || cargo install --quiet --locked cargo-afl@0.18.2 --root "$tools"
# AFL++'s runtime for this rustc (kept under ~/.local/share/afl.rs); a no-op error when built.
cargo afl config --build >/dev/null 2>&1 || true
export CARGO_TARGET_DIR="${ASOF_AFL_TARGET:-$HOME/.cache/asof-afl-target}"
cargo afl build --release --locked $(printf -- '--bin %s ' "${targets[@]}")
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
found=0
for t in "${targets[@]}"; do
  out=$(mktemp -d)
  cargo afl fuzz -V "$secs" -i "seeds/$t" -o "$out" "$CARGO_TARGET_DIR/release/$t" >"$out/afl.log" 2>&1 || {
    tail -20 "$out/afl.log"; exit 2; }
  echo "== $t"
  grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|bitmap_cvg|edges_found|total_edges)' \
    "$out/default/fuzzer_stats"
  shopt -s nullglob
  bad=("$out"/default/crashes/id:* "$out"/default/hangs/id:*)
  if [ ${#bad[@]} -gt 0 ]; then
    mkdir -p "crashes/$t"
    cp "${bad[@]}" "crashes/$t/"
    echo "${#bad[@]} crashing or hanging input(s) copied to fuzz/crashes/$t/"
    found=1
  else
    echo "no crash or hang in ${secs}s"
  fi
  rm -rf "$out"
done
exit "$found"
