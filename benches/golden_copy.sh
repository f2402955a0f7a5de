#!/usr/bin/env bash
# GLEIF golden copy ingest (see BENCHMARKS.md, "Golden copy"): benches/golden_copy.sh [N...]
# For each N (default 250000 1000000): a synthetic golden copy of N LEIs (benches/
# golden_copy_gen.py, ~750 bytes a record like GLEIF's) ingested into an empty corpus, then the
# next golden copy of the same list (0.5% modified, 0.05% gone, 0.1% new) ingested on top:
# wall time and peak RSS of each from /usr/bin/time -v, beside the input's size. The second
# ingest is the operator's steady state (three golden copies a day); the first is once.
# Results land in <target>/bench-results/golden-copy.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ -d "$HOME/.cache/asof-target" ]; then
  export CARGO_TARGET_DIR="$HOME/.cache/asof-target"
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
work="$target/bench-golden"
out="$target/bench-results"
mkdir -p "$out"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(250000 1000000)

cargo build --release --locked -p asof --bin asof
bin="$target/release/asof"

run() { # label, corpus, file
  /usr/bin/time -v "$bin" ingest --corpus "$2" --source gleif.lei \
    --commit-time 2025-05-16T00:00:00Z "$3" >"$work/$1.out" 2>"$work/$1.time"
  printf '%-34s input %6s MiB  wall %s  peak RSS %s KiB  %s\n' "$1" \
    "$(( $(stat -c %s "$3") >> 20 ))" \
    "$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$work/$1.time")" \
    "$(awk -F': ' '/Maximum resident/{print $2}' "$work/$1.time")" \
    "$(cat "$work/$1.out" "$work/$1.time" | grep -o 'list changes: [^;]*' | head -1)"
}
{
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)"
  grep -m1 'model name' /proc/cpuinfo || true
  for n in "${sizes[@]}"; do
    rm -rf "$work"
    mkdir -p "$work"
    python3 benches/golden_copy_gen.py "$n" "$work/20250515-0000-gleif-goldencopy-lei2-golden-copy.csv"
    python3 benches/golden_copy_gen.py "$n" "$work/20250515-0800-gleif-goldencopy-lei2-golden-copy.csv" --next
    run "first golden copy, $n LEIs" "$work/corpus" "$work/20250515-0000-gleif-goldencopy-lei2-golden-copy.csv"
    run "next golden copy, $n LEIs" "$work/corpus" "$work/20250515-0800-gleif-goldencopy-lei2-golden-copy.csv"
  done
  rm -rf "$work"
} | tee "$out/golden-copy.txt"
