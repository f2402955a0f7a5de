#!/usr/bin/env bash
# The live stream's benchmark (see BENCHMARKS.md): benches/stream.sh [PUBLISHES] [CLIENTS]
# Builds the release binaries, then runs asof-stream-bench against the real `asof serve` over a
# copy of the sample corpus, with the default reload interval (1 s) and with 0.25 s:
# publish-to-event latency over PUBLISHES publishes (default 100) to one client, then fan-out
# to CLIENTS open streams (default 500) and the server's resident memory with them open.
# Results land in <target>/bench-results/stream/.
set -euo pipefail
cd "$(dirname "$0")/.."
publishes=${1:-100}
clients=${2:-500}
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ -d "$HOME/.cache/asof-target" ]; then
  export CARGO_TARGET_DIR="$HOME/.cache/asof-target"
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target/bench-results/stream"
mkdir -p "$out"
cargo build --release --locked -p asof --bin asof -p asof-bench --bin asof-stream-bench
{ echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)";
  grep -m1 'model name' /proc/cpuinfo || true; } >"$out/machine.txt"
# Each stream is a socket on both sides (client and server in this one machine).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
for interval in 1 0.25; do
  "$target/release/asof-stream-bench" --bin "$target/release/asof" --work "$target/bench/stream" \
    --publishes "$publishes" --clients "$clients" --reload-interval "$interval" |
    tee "$out/stream-$interval.md"
done
echo "results in $out"
