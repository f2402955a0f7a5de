#!/usr/bin/env bash
# The one benchmark command (see BENCHMARKS.md): benches/run.sh [quick|full]
#   quick: 2M rows over 2,000 days, 100k filers;  full: 20M rows over 8,000 days, 780k filers.
# Builds the release binaries, writes the synthetic corpus once (timed, with peak memory) under
# $ASOF_BENCH_DIR (default <target>/bench/<scale>), then runs, over the same drawn queries:
#   1. asof-bench: engine p50/p99 for big and small filers (first page, next page, one-day diff,
#      coverage decision), server-start time and resident memory, and the DataFusion scan path;
#   2. criterion (cargo bench -p asof-bench --bench engine);
#   3. DuckDB (Python package, in a venv) answering the same first pages over the same files;
#   4. wrk against `asof serve` (benches/load.sh), with 16 and with 32 connections.
# Results land in <target>/bench-results/<scale>/ (one file per step).
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-quick}
case "$scale" in
  quick) rows=2000000 days=2000 ciks=100000 ;;
  full) rows=20000000 days=8000 ciks=780000 ;;
  *) echo "usage: $0 [quick|full]" >&2; exit 2 ;;
esac
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ -d "$HOME/.cache/asof-target" ]; then
  export CARGO_TARGET_DIR="$HOME/.cache/asof-target"
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
corpus="${ASOF_BENCH_DIR:-$target/bench}/$scale"
out="$target/bench-results/$scale"
mkdir -p "$out"

cargo build --release --locked -p asof --bin asof -p asof-bench --bin asof-bench
bin="$target/release/asof"
{ echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)";
  grep -m1 'model name' /proc/cpuinfo || true; } >"$out/machine.txt"

if [ ! -f "$corpus/manifests/CURRENT" ]; then
  rm -rf "$corpus"
  /usr/bin/time -v "$bin" bench-corpus --rows "$rows" --days "$days" --ciks "$ciks" --seed 1 \
    --out "$corpus" 2>"$out/build.txt" | tee "$out/version.txt"
  grep -E 'wrote|Elapsed|Maximum resident' "$out/build.txt" || true
fi
du -sh "$corpus/snapshots/partitions" "$corpus/snapshots/access" >"$out/disk.txt"

"$target/release/asof-bench" "$corpus" --queries 200 --seed 7 --scan 5 \
  --emit-queries "$out/queries.jsonl" | tee "$out/engine.md"

ASOF_BENCH_CORPUS="$corpus" cargo bench --locked -p asof-bench --bench engine 2>&1 |
  grep -E '^engine/|time:' | tee "$out/criterion.txt"

venv="$target/bench-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check duckdb==1.4.4 pytz
fi
"$venv/bin/python" benches/duckdb_compare.py "$corpus" "$out/queries.jsonl" --per-size 20 |
  tee "$out/duckdb.md"

# Two closed-loop loads: 16 connections (what two cores serve without queueing) and 32
# (saturated: latency is then mostly time spent waiting in the queue).
for c in 16 32; do
  ASOF_BIN="$bin" benches/load.sh "$corpus" "$out/queries.jsonl" 30s "$c" | tee "$out/load-c$c.txt"
done
echo "results in $out"
