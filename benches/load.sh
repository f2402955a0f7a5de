#!/usr/bin/env bash
# HTTP load: wrk against `asof serve` on loopback, keyed GET /v1/news first pages.
#
# Usage: benches/load.sh CORPUS QUERIES.jsonl [DURATION] [CONNECTIONS]
#   CORPUS        a directory written by `asof bench-corpus`
#   QUERIES.jsonl drawn by `asof-bench --emit-queries` (random CIKs and cuts)
#   DURATION      wrk duration (default 30s); CONNECTIONS (default 32), 2 wrk threads
# Needs a release build of `asof` (ASOF_BIN, default target/release/asof) and wrk (installed
# from Debian's packages when missing). The server runs with a fresh SQLite state store; 128
# desk keys share the load so the per-key rate limit (1,200/min) does not cut the run short.
# Prints wrk's report; the last line is one JSON object with requests/s, p50/p99 and errors.
set -euo pipefail
corpus=${1:?corpus directory}
queries=${2:?queries jsonl}
duration=${3:-30s}
conns=${4:-32}
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin=${ASOF_BIN:-$target/release/asof}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
db="sqlite://$work/state.db"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

for i in $(seq 1 128); do
  "$bin" keys create --database-url "$db" --email "load$i@example.com" --plan desk 2>/dev/null | tail -1
done >"$work/keys.txt"

ASOF_LOG=warn "$bin" serve --corpus "$corpus" --listen "127.0.0.1:$port" --database-url "$db" \
  2>"$work/serve.log" &
server=$!
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done

python3 - "$queries" >"$work/paths.txt" <<'PY'
import json, sys, urllib.parse
for line in open(sys.argv[1]):
    q = json.loads(line)
    print("/v1/news?" + urllib.parse.urlencode({"cik": q["cik"], "as_of": q["as_of"], "limit": 100}))
PY

cat >"$work/load.lua" <<LUA
local paths, keys = {}, {}
for l in io.lines("$work/paths.txt") do paths[#paths + 1] = l end
for l in io.lines("$work/keys.txt") do keys[#keys + 1] = l end
local n = 0
request = function()
  n = n + 1
  local key = keys[(n % #keys) + 1]
  return wrk.format("GET", paths[math.random(#paths)], { ["Authorization"] = "Bearer " .. key })
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format(
    '{"requests": %d, "seconds": %.2f, "requests_per_s": %.1f, "p50_ms": %.2f, "p99_ms": %.2f, "errors": %d, "non_2xx": %d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors, summary.errors.status))
end
LUA

# A short warm-up, then the measured run.
wrk -t2 -c"$conns" -d5s -s "$work/load.lua" "http://127.0.0.1:$port" >/dev/null
wrk -t2 -c"$conns" -d"$duration" --latency -s "$work/load.lua" "http://127.0.0.1:$port"
