#!/usr/bin/env bash
# The hot path against the HTTP floor, in one run on one machine: `asof serve` (release, fresh
# SQLite state) answering keyed first pages, measured beside `GET /health` so the ratio, not
# the absolute figure, is what a run is judged by (machines differ).
#
# Usage: benches/hot_path.sh CORPUS QUERIES.jsonl [DURATION]
#   CORPUS        a directory written by `asof bench-corpus`
#   QUERIES.jsonl drawn by `asof-bench --emit-queries` (half big filers, half small)
#   DURATION      of each closed-loop run (default 20s; the sequential runs take half of it)
# Steps, all against the same server process:
#   0. with ASOF_BARE=<asof-bare-axum>: wrk -t2 -c16 GET /health on the bare axum server (the
#      machine's HTTP limit, benches/src/bin/asof-bare-axum.rs), before and after step 1, and
#      once answering the very head and body our /health answered (the cost of sending the
#      contract's bytes with no request path at all)
#   1. wrk -t2 -c16 GET /health                                     (the floor)
#   2. wrk -t2 -c16 keyed GET /v1/news?cik=&as_of=&limit=100, every drawn cut
#   3. wrk -t1 -c1 (one keep-alive connection, sequential): GET /health (and the bare server's,
#      the floor of the latencies), big filers limit=100, big filers limit=1, small filers
#      limit=100
#   4. the server's resident and peak resident memory after all of it
# With ASOF_PIN=1 every server runs on the first CPU and wrk on the others (taskset, so the
# servers' runtimes start one worker each): the client no longer takes cores from, preempts,
# or is preempted by the server it loads, and a server's CPU per request is its own work and
# its own sends. Either way each run also reports the server's context switches per request
# (all its threads, from /proc): voluntary ones are waits for work, involuntary ones
# preemptions (by wrk, when the two share cores).
# With ASOF_PERF_OUT=FILE, step 2 is also profiled (perf, from Debian's linux-perf), and the
# bare server sending the same pages into FILE.bare. With
# ASOF_METRICS=1 the server keeps metrics (--metrics-listen) and they are scraped every second
# during the runs, harsher than Prometheus's usual 15 s (benches/metrics_overhead.sh).
# Needs a release build of `asof` (ASOF_BIN, default <target>/release/asof) and wrk (installed
# from Debian's packages when missing). 512 desk keys share the load so the per-key limit
# (1,200 a minute) is never what a run measures. Prints a Markdown table, then one JSON line.
set -euo pipefail
corpus=${1:?corpus directory}
queries=${2:?queries jsonl}
duration=${3:-20}
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin=${ASOF_BIN:-$target/release/asof}
keys=${ASOF_BENCH_KEYS:-512}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }

# Where the servers and the client run: the whole machine for both, or with ASOF_PIN=1 the
# first CPU for the servers and the rest for wrk.
server_cpus=() client_cpus=()
if [ "${ASOF_PIN:-0}" = 1 ]; then
  cpus=$(nproc)
  [ "$cpus" -ge 2 ] || { echo "ASOF_PIN=1 needs two CPUs or more" >&2; exit 2; }
  server_cpus=(taskset -c 0)
  client_cpus=(taskset -c "1-$((cpus - 1))")
fi
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
db="sqlite://$work/state.db"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

for i in $(seq 1 "$keys"); do
  "$bin" keys create --database-url "$db" --email "hot$i@example.com" --plan desk 2>/dev/null | tail -1
done >"$work/keys.txt"

metrics=()
if [ "${ASOF_METRICS:-0}" = 1 ]; then
  mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  metrics=(--metrics-listen "127.0.0.1:$mport")
fi
ASOF_LOG=warn "${server_cpus[@]}" "$bin" serve --corpus "$corpus" --listen "127.0.0.1:$port" --database-url "$db" \
  "${metrics[@]}" 2>"$work/serve.log" &
server=$!
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done

# One path file per workload.
python3 - "$queries" "$work" <<'PY'
import json, sys, urllib.parse
qs = [json.loads(l) for l in open(sys.argv[1])]
def write(name, rows, limit):
    with open(f"{sys.argv[2]}/{name}.txt", "w") as f:
        for q in rows:
            f.write("/v1/news?" + urllib.parse.urlencode({"cik": q["cik"], "as_of": q["as_of"], "limit": limit}) + "\n")
write("all", qs, 100)
write("big", [q for q in qs if q["size"] == "big"], 100)
write("big1", [q for q in qs if q["size"] == "big"], 1)
write("small", [q for q in qs if q["size"] == "small"], 100)
with open(f"{sys.argv[2]}/health.txt", "w") as f:
    f.write("/health\n")
PY

# Paths in a random order, keys round robin; the summary as one JSON object. A non-2xx answer
# counts as an error (a rate-limited run measures nothing).
cat >"$work/load.lua" <<LUA
local paths, keys = {}, {}
local file = os.getenv("PATHS")
for l in io.lines(file) do paths[#paths + 1] = l end
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
    '{"requests": %d, "requests_per_s": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, "errors": %d}\n',
    summary.requests, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors))
end
LUA

# The CPU a process has spent (user and system), in clock ticks: read around each closed-loop
# run, so a server's CPU per request is known beside its throughput. wrk shares this machine's
# cores with the server; the CPU a request costs the server is the figure that does not depend
# on how the cores were divided between them.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# Minor page faults (field 10): memory the allocator gave back to the kernel and touches again
# costs a fault a page, counted in the kernel's share of a request.
faults() { awk '{ print $10 }' "/proc/$1/stat"; }
# Context switches of all of a process's threads: "voluntary" (it waited for work: each a
# wake-up someone paid for) and "nonvoluntary" (it was preempted), as two numbers.
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }'
}
hz=$(getconf CLK_TCK)
measured() { # name connections pid, then the wrk command
  local name=$1 conns=$2 pid=$3 before faulted switched after
  shift 3
  before=$(ticks "$pid")
  faulted=$(faults "$pid")
  switched=$(switches "$pid")
  "${client_cpus[@]}" "$@" | tail -1 >"$work/$name-$conns.json"
  echo "$(( $(ticks "$pid") - before ))" >"$work/$name-$conns.ticks"
  echo "$(( $(faults "$pid") - faulted ))" >"$work/$name-$conns.faults"
  after=$(switches "$pid")
  echo "$(( ${after% *} - ${switched% *} )) $(( ${after#* } - ${switched#* } ))" >"$work/$name-$conns.switches"
}
run() { # name threads connections seconds
  PATHS="$work/$1.txt" measured "$1" "$3" "$server" \
    wrk -t"$2" -c"$3" -d"$4s" -s "$work/load.lua" "http://127.0.0.1:$port"
}
if [ ${#metrics[@]} -gt 0 ]; then
  ( while kill -0 "$server" 2>/dev/null; do
      curl -fs "http://127.0.0.1:$mport/metrics" -o /dev/null || true
      sleep 1
    done ) &
fi
# Warm-up: every drawn cut once or more, as a serving process would have seen them.
PATHS="$work/all.txt" wrk -t2 -c16 -d5s -s "$work/load.lua" "http://127.0.0.1:$port" >/dev/null
half=$(( duration / 2 > 1 ? duration / 2 : 1 ))
# The bare server's /health around ours (each run alone on the machine), so the comparison is
# of one run; its port is another free one.
bare_run() { # name paths threads connections seconds [asof-bare-axum arguments]
  [ -n "${ASOF_BARE:-}" ] || return 0
  local name=$1 paths=$2 threads=$3 conns=$4 seconds=$5 bport
  shift 5
  bport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${server_cpus[@]}" "$ASOF_BARE" --listen "127.0.0.1:$bport" "$@" >"$work/bare.log" 2>&1 &
  local bare=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$bport/health" >/dev/null 2>&1 && break
    sleep 0.05
  done
  # With ASOF_PERF_OUT, the bare server sending our pages is profiled as ours is (FILE.bare):
  # where the same bytes cost it less, the difference is ours, kernel paths included.
  local perf_bare=
  if [ -n "${ASOF_PERF_OUT:-}" ] && [ "$name" = samepages ]; then
    # shellcheck disable=SC2086 # the arguments are words
    perf record -q ${ASOF_PERF_ARGS:--F 499} -p "$bare" -o "$ASOF_PERF_OUT.bare" -- sleep "$seconds" 2>/dev/null &
    perf_bare=$!
  fi
  PATHS="$work/$paths.txt" measured "$name" "$conns" "$bare" \
    wrk -t"$threads" -c"$conns" -d"${seconds}s" -s "$work/load.lua" "http://127.0.0.1:$bport"
  [ -z "$perf_bare" ] || wait "$perf_bare"
  kill "$bare" && wait "$bare" 2>/dev/null || true
}
# The head and body of one of our /health answers, for the bare server to send as its own.
curl -fs -D "$work/health.head" -o "$work/health.body" "http://127.0.0.1:$port/health"
bare_run bare health 2 16 "$duration"
run health 2 16 "$duration"
bare_run bare2 health 2 16 "$duration"
bare_run samebytes health 2 16 "$duration" --headers "$work/health.head" --body "$work/health.body"
# ASOF_PERF_OUT=FILE: a flat CPU profile of the server (perf record, 499 Hz) during the keyed
# run, for `perf report -i FILE --no-children`; ASOF_PERF_ARGS replaces its sampling arguments
# (`-F 499 --call-graph dwarf` for where a symbol's time comes from).
if [ -n "${ASOF_PERF_OUT:-}" ]; then
  # shellcheck disable=SC2086 # the arguments are words
  perf record -q ${ASOF_PERF_ARGS:--F 499} -p "$server" -o "$ASOF_PERF_OUT" -- sleep "$duration" 2>/dev/null &
  perf=$!
fi
run all 2 16 "$duration"
[ -z "${perf:-}" ] || wait "$perf"
# Every drawn page as we answered it, for the bare server to send as its own: what the same
# load costs a server that only sends the bytes (the pages' ceiling beside its /health's).
if [ -n "${ASOF_BARE:-}" ]; then
  mkdir -p "$work/answers"
  n=0
  # Keys in turn, as in the runs: one key asking every drawn page after them could be over its
  # limit, and a 429 is no page.
  mapfile -t keyring <"$work/keys.txt"
  while read -r path; do
    n=$((n + 1))
    key=${keyring[$(( n % ${#keyring[@]} ))]}
    curl -fs -H "Authorization: Bearer $key" -D "$work/answers/$n.head" \
      -o "$work/answers/$n.body" "http://127.0.0.1:$port$path"
    printf '%s\t%s\n' "$path" "$n" >>"$work/answers/index"
  done <"$work/all.txt"
  bare_run samepages all 2 16 "$duration" --answers "$work/answers"
fi
# The floor of the sequential latencies: one keep-alive connection asking /health, of ours and
# of the bare server (the machine's round trip through two wake-ups, which differs between
# machines by more than the targets' margins).
run health 1 1 "$half"
bare_run bare health 1 1 "$half"
run big 1 1 "$half"
run big1 1 1 "$half"
run small 1 1 "$half"
rss=$(awk '/VmRSS/{print $2}' "/proc/$server/status")
hwm=$(awk '/VmHWM/{print $2}' "/proc/$server/status")

python3 - "$work" "$rss" "$hwm" "$hz" <<'PY'
import json, sys
w = sys.argv[1]
hz = int(sys.argv[4])
import os
kinds = ["health-16", "all-16", "health-1", "big-1", "big1-1", "small-1"]
if os.path.exists(f"{w}/bare-16.json"):
    kinds = ["bare-16", "bare2-16", "samebytes-16", "samepages-16", "bare-1"] + kinds
r = {k: json.load(open(f"{w}/{k}.json")) for k in kinds}
# The server's CPU per request in each run (user and system, all its threads), and requests per
# second of that CPU: what a request costs the server, whatever share of the cores wrk took.
for k, v in r.items():
    cpu_s = int(open(f"{w}/{k}.ticks").read()) / hz
    v["server_cpu_s"] = cpu_s
    v["cpu_us_per_request"] = 1e6 * cpu_s / v["requests"] if v["requests"] else None
    v["requests_per_cpu_s"] = v["requests"] / cpu_s if cpu_s else None
    v["faults_per_request"] = int(open(f"{w}/{k}.faults").read()) / v["requests"] if v["requests"] else None
    waits, preempted = (int(x) for x in open(f"{w}/{k}.switches").read().split())
    v["waits_per_request"] = waits / v["requests"] if v["requests"] else None
    v["preempted_per_request"] = preempted / v["requests"] if v["requests"] else None
h, a = r["health-16"], r["all-16"]
ratio = a["requests_per_s"] / h["requests_per_s"]
bare = None
if "bare-16" in r:
    bare = (r["bare-16"]["requests_per_s"] + r["bare2-16"]["requests_per_s"]) / 2
print(f"servers {'on CPU 0, wrk on the others (ASOF_PIN=1)' if os.environ.get('ASOF_PIN') == '1' else 'and wrk sharing every CPU'}\n")
print("| what | requests/s | p50 | p99 | errors | server CPU per request | requests per server CPU-second | page faults per request | server waits / preemptions per request |")
print("|---|---|---|---|---|---|---|---|---|")
names = {"bare-16": "bare axum `GET /health`, 16 connections (before ours)",
         "bare2-16": "bare axum `GET /health`, 16 connections (after ours)",
         "samebytes-16": "bare axum sending our `/health`'s head and body, 16 connections",
         "samepages-16": "bare axum sending our answers to the drawn pages, 16 connections",
         "health-16": "`GET /health`, 16 connections", "all-16": "keyed first pages (limit 100), 16 connections",
         "big-1": "big filer, limit 100, sequential", "big1-1": "big filer, limit 1, sequential",
         "small-1": "small filer, limit 100, sequential",
         "health-1": "`GET /health`, sequential (the latencies' floor)",
         "bare-1": "bare axum `GET /health`, sequential (the machine's floor)"}
for k, v in r.items():
    print(f"| {names[k]} | {v['requests_per_s']:,.0f} | {v['p50_ms']:.3f} ms | {v['p99_ms']:.3f} ms | {v['errors']} "
          f"| {v['cpu_us_per_request']:.1f} µs | {v['requests_per_cpu_s']:,.0f} | {v['faults_per_request']:.2f} "
          f"| {v['waits_per_request']:.2f} / {v['preempted_per_request']:.2f} |")
per_cpu = lambda k: r[k]["requests_per_cpu_s"]
print(f"\nkeyed / health, per server CPU-second: {100 * per_cpu('all-16') / per_cpu('health-16'):.1f}%")
print(f"keyed / health throughput: {100 * ratio:.1f}%; server RSS {int(sys.argv[2]) / 1024:.0f} MiB, peak {int(sys.argv[3]) / 1024:.0f} MiB")
if bare:
    print(f"our /health / bare axum /health (mean of its two runs): {100 * h['requests_per_s'] / bare:.1f}%")
    bare_cpu = (per_cpu("bare-16") + per_cpu("bare2-16")) / 2
    print(f"per server CPU-second: our /health / bare axum /health: {100 * per_cpu('health-16') / bare_cpu:.1f}%; "
          f"/ bare axum sending our bytes: {100 * per_cpu('health-16') / per_cpu('samebytes-16'):.1f}%; "
          f"our pages / bare axum sending them: {100 * per_cpu('all-16') / per_cpu('samepages-16'):.1f}%")
    same = r["samebytes-16"]["requests_per_s"]
    print(f"bare axum sending our bytes / bare axum: {100 * same / bare:.1f}%; our /health / that: {100 * h['requests_per_s'] / same:.1f}%")
    pages = r["samepages-16"]["requests_per_s"]
    print(f"bare axum sending our pages / bare axum sending our /health: {100 * pages / same:.1f}% (the ceiling of the keyed / health ratio); our pages / that: {100 * a['requests_per_s'] / pages:.1f}%")
print(json.dumps({**r, "ratio": ratio, "ratio_per_cpu": per_cpu("all-16") / per_cpu("health-16"), "health_of_bare": h["requests_per_s"] / bare if bare else None,
                  "same_bytes_of_bare": r["samebytes-16"]["requests_per_s"] / bare if bare else None,
                  "rss_mib": int(sys.argv[2]) / 1024, "peak_rss_mib": int(sys.argv[3]) / 1024}))
PY
if grep -q '"errors": [1-9]' "$work"/*.json; then
  echo "errors in a run (see above): the figures do not measure the hot path" >&2
  exit 1
fi
