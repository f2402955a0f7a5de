#!/usr/bin/env bash
# Ingest and backfill cost (see BENCHMARKS.md, "Ingest"): benches/ingest.sh [quick|full]
#   1. one day's EDGAR daily index (4,000 rows) plus 50 submissions captures ingested into a
#      copy of the bench corpus (hard links: objects are immutable, the pointer is replaced by
#      rename), wall time and peak RSS from /usr/bin/time -v, and the same ingest into an empty
#      corpus as the baseline of this run;
#   2. a quarterly master.idx of 320,000 filings (and of half and twice as many) ingested into
#      an empty corpus (one year's access files derived whole from a big input), wall time and
#      peak RSS;
#   3. the biggest filer's first page from `asof serve` over a copy of the bench corpus, idle
#      (the baseline), while the same ingest publishes into that copy, and after the server
#      loaded the new version;
#   4. a backfill of 1,000 days (4,000 rows a weekday) from a local EDGAR stand-in, timed, then
#      the same backfill killed part-way and resumed, whose final corpus_version must equal the
#      uninterrupted run's.
# The bench corpus is written by benches/run.sh's step (same scale names) when missing.
# Results land in <target>/bench-results/<scale>/ingest*.txt.
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
work="$target/bench-ingest/$scale"
mkdir -p "$out"

cargo build --release --locked -p asof --bin asof -p asof-test-support --bin asof-fake-edgar
bin="$target/release/asof"
fake="$target/release/asof-fake-edgar"
{ echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)";
  grep -m1 'model name' /proc/cpuinfo || true; } >"$out/machine.txt"

if [ ! -f "$corpus/manifests/CURRENT" ]; then
  rm -rf "$corpus"
  /usr/bin/time -v "$bin" bench-corpus --rows "$rows" --days "$days" --ciks "$ciks" --seed 1 \
    --out "$corpus" 2>"$out/build.txt" | tee "$out/version.txt"
fi

rm -rf "$work"
mkdir -p "$work"
# The day after the corpus's last day (2026-01-31, a Saturday): Monday 2026-02-02.
"$fake" write "$work/input" 2026-02-02 4000 50 2026-02-02T12:00:00Z
commit=2026-02-03T06:00:00Z
ingest() { # corpus, label
  /usr/bin/time -v "$bin" ingest --corpus "$1" --source sec.edgar --commit-time "$commit" \
    "$work"/input/* >"$work/$2.version" 2>"$work/$2.time"
  printf '%-28s wall %s  peak RSS %s KiB\n' "$2" \
    "$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$work/$2.time")" \
    "$(awk -F': ' '/Maximum resident/{print $2}' "$work/$2.time")"
}
{
  echo "## one day's daily index (4,000 rows) + 50 submissions captures (2,000 rows)"
  ingest "$work/empty" "into an empty corpus"
  cp -al "$corpus" "$work/copy"
  ingest "$work/copy" "into the $scale bench corpus"
  grep -h 'published' "$work"/*.time || true
} | tee "$out/ingest.txt"

# A quarter's full index at once: a master.idx of 320,000 filings over the 62 weekdays of
# 2025-Q1 (EDGAR's quarterly master.idx runs 300k+ lines), ingested into an empty corpus, and
# the same with half and twice as many filings, so the growth of peak memory with the input
# shows. Its year has no access files yet, so the publish derives them whole: peak memory is a
# derive run plus what the ingest keeps per row (ids and hashes), not its rows.
for n in 160000 320000 640000; do
python3 - "$work/quarter$n" "$n" <<'PY'
import datetime, os, random, sys
random.seed(1)
n = int(sys.argv[2])
os.makedirs(sys.argv[1], exist_ok=True)
days, d = [], datetime.date(2025, 1, 2)
while d <= datetime.date(2025, 3, 31):
    if d.weekday() < 5: days.append(d)
    d += datetime.timedelta(1)
forms = ["10-Q", "8-K", "4", "S-1", "13F-HR", "SC 13G/A", "424B2", "D", "6-K", "10-K"]
with open(os.path.join(sys.argv[1], "master.idx"), "w") as f:
    f.write("Description:           Master Index of EDGAR Dissemination Feed\n"
            "Last Data Received:    March 31, 2025\nComments:              webmaster@sec.gov\n"
            "Anonymous FTP:         ftp://ftp.sec.gov/edgar/\n"
            "Cloud HTTP:            https://www.sec.gov/Archives/\n\n\n\n\n"
            "CIK|Company Name|Form Type|Date Filed|Filename\n" + "-" * 80 + "\n")
    for i in range(n):
        cik = random.randint(1000, 2100000)
        day = random.choice(days)
        f.write(f"{cik}|COMPANY NUMBER {cik} INC|{random.choice(forms)}|"
                f"{day.isoformat()}|edgar/data/{cik}/{1000000000+i:010d}-25-{i:06d}.txt\n")
PY
q="$work/quarter$n"
{
  echo "## a quarterly master.idx ($n filings, $(du -m "$q/master.idx" | cut -f1) MB) into an empty corpus"
  /usr/bin/time -v "$bin" ingest --corpus "$q/corpus" --source sec.edgar \
    --commit-time 2025-04-01T06:00:00Z "$q/master.idx" >"$q.version" 2>"$q.time"
  printf 'wall %s  peak RSS %s KiB  %s\n' \
    "$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$q.time")" \
    "$(awk -F': ' '/Maximum resident/{print $2}' "$q.time")" "$(tail -1 "$q.version")"
} | tee -a "$out/ingest.txt"
rm -rf "$q"
done

# Serving while an ingest publishes into the corpus being served: the biggest filer's first
# page (CIK 1000, rank 1 of the Zipf draw), p50/p99 of sequential keyed requests, idle and while
# the ingest runs and the server loads the version it publishes.
cp -al "$corpus" "$work/live"
db="sqlite://$work/state.db"
key=$("$bin" keys create --database-url "$db" --email bench@example.com --plan desk 2>/dev/null | tail -1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ASOF_LOG=warn "$bin" serve --corpus "$work/live" --listen "127.0.0.1:$port" --database-url "$db" \
  2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
page="http://127.0.0.1:$port/v1/news?cik=1000&as_of=2026-01-29T12:00:00Z&limit=100"
times() { # n: request times in ms, one per line
  for _ in $(seq 1 "$1"); do
    curl -s -o /dev/null -H "Authorization: Bearer $key" -w '%{time_total}\n' "$page"
  done
}
stats() { sort -n | awk '{a[NR]=$1*1000} END {printf "p50 %.2f ms, p99 %.2f ms over %d requests", a[int(NR*0.5)+1], a[int(NR*0.99)+1], NR}'; }
{
  echo "## serving the corpus an ingest publishes into (biggest filer's first page, sequential curl)"
  echo "idle: $(times 300 | stats)"
  ( "$bin" ingest --corpus "$work/live" --source sec.edgar --commit-time "$commit" \
      "$work"/input/* >"$work/live.version" 2>/dev/null ) &
  busy=$!
  : >"$work/during.txt"
  while kill -0 $busy 2>/dev/null; do times 20 >>"$work/during.txt"; done
  wait $busy
  echo "during the ingest: $(stats <"$work/during.txt")"
  # The server checks the pointer every second, then verifies and loads the new version
  # (its access index included) beside the old one, which it keeps serving meanwhile.
  published=$(tail -1 "$work/live.version")
  served() { curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/meta" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("corpus_version"))'; }
  start=$(date +%s.%N)
  : >"$work/reload.txt"
  until [ "$(served)" = "$published" ]; do
    times 10 >>"$work/reload.txt"
    [ "$(echo "$(date +%s.%N) - $start > 600" | bc)" = 1 ] && { echo "not reloaded in 600 s"; exit 1; }
  done
  printf 'while the server loads the new version (%.1f s after the publish): %s\n' \
    "$(echo "$(date +%s.%N) - $start" | bc)" "$(stats <"$work/reload.txt")"
  echo "after: $(times 300 | stats); serving $published"
} | tee -a "$out/ingest.txt"
kill $server 2>/dev/null || true

# Backfill: 1,000 days ending 2025-12-31 from the local stand-in, batches of 30 days.
"$fake" serve 2023-04-07 2025-12-31 4000 11 >"$work/edgar.url" &
edgar=$!
trap 'kill $edgar 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q listening "$work/edgar.url" 2>/dev/null && break; sleep 0.1; done
url=$(awk '/listening/{print $2}' "$work/edgar.url")
backfill=(poll --user-agent "asof bench bench@example.com" --edgar-base-url "$url"
  --backfill 2023-04-07..2025-12-31 --batch-days 30 --commit-time 2026-01-05T00:00:00Z)
{
  echo "## backfill of 1,000 days (4,000 rows a weekday), batches of 30 days"
  start=$(date +%s.%N)
  /usr/bin/time -v "$bin" "${backfill[@]}" --corpus "$work/backfill" \
    >"$work/backfill.version" 2>"$work/backfill.time"
  end=$(date +%s.%N)
  printf 'uninterrupted: %.0f s, peak RSS %s KiB, version %s\n' "$(echo "$end - $start" | bc)" \
    "$(awk -F': ' '/Maximum resident/{print $2}' "$work/backfill.time")" "$(tail -1 "$work/backfill.version")"
  # Killed (SIGKILL) once a third of the days are certified, then resumed.
  "$bin" "${backfill[@]}" --corpus "$work/resumed" >/dev/null 2>&1 &
  victim=$!
  while kill -0 $victim 2>/dev/null; do
    n=$(ls "$work/resumed/manifests" 2>/dev/null | grep -c json || true)
    [ "$n" -ge 12 ] && { kill -9 $victim; killed_at=$n; break; }
    sleep 0.5
  done
  wait $victim 2>/dev/null || true
  "$bin" "${backfill[@]}" --corpus "$work/resumed" >"$work/resumed.version" 2>/dev/null
  if [ "$(tail -1 "$work/resumed.version")" = "$(tail -1 "$work/backfill.version")" ]; then
    echo "killed (SIGKILL) with ${killed_at:-?} of $(ls "$work/resumed/manifests" | grep -c json) versions published, resumed: same corpus_version"
  else
    echo "killed and resumed: DIFFERENT corpus_version $(tail -1 "$work/resumed.version")"; exit 1
  fi
} | tee -a "$out/ingest.txt"
echo "results in $out/ingest.txt"
