#!/usr/bin/env bash
# Issue 46's throughput target: with metrics on (--metrics-listen, scraped every second),
# keyed by-CIK first pages keep at least 95% of the throughput measured with them off, in the
# same run on the same machine. Runs benches/hot_path.sh four times, alternating off / on /
# off / on (so a drift of the machine during the run falls on both sides), and compares the
# keyed 16-connection throughput of each pair, with /health as the floor of each run.
#
# Usage: benches/metrics_overhead.sh CORPUS QUERIES.jsonl [DURATION]   (see hot_path.sh)
set -euo pipefail
here=$(dirname "$0")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in 1 2; do
  for m in 0 1; do
    echo "round $round, metrics $([ $m = 1 ] && echo on || echo off)" >&2
    ASOF_METRICS=$m "$here/hot_path.sh" "$@" | tail -1 >"$out/$round-$m.json"
  done
done
python3 - "$out" <<'PY'
import json, sys
w = sys.argv[1]
rows, ratios = [], []
for rnd in (1, 2):
    off, on = (json.load(open(f"{w}/{rnd}-{m}.json")) for m in (0, 1))
    for name, r in (("off", off), ("on", on)):
        a, h = r["all-16"], r["health-16"]
        rows.append((rnd, name, a["requests_per_s"], a["p50_ms"], a["p99_ms"], a["errors"], h["requests_per_s"]))
    ratios.append(on["all-16"]["requests_per_s"] / off["all-16"]["requests_per_s"])
print("| round | metrics | by-CIK req/s | p50 | p99 | non-2xx | `/health` req/s |")
print("|---|---|---|---|---|---|---|")
for rnd, name, rps, p50, p99, err, h in rows:
    print(f"| {rnd} | {name} | {rps:,.0f} | {p50:.3f} ms | {p99:.3f} ms | {err} | {h:,.0f} |")
print(f"\nwith metrics / without, by round: {', '.join(f'{100 * r:.1f}%' for r in ratios)}; "
      f"both rounds together {100 * sum(r[2] for r in rows if r[1] == 'on') / sum(r[2] for r in rows if r[1] == 'off'):.1f}%")
print(json.dumps({"ratios": ratios}))
PY
