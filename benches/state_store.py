#!/usr/bin/env python3
"""The state store off the hot path (issue 65, point 4): keyed first pages served with SQLite
and one replica, against PostgreSQL with one replica and with two replicas behind HAProxy.

Every run is `wrk -t2 -c16` over the same drawn cuts (`GET /v1/news?cik=&as_of=&limit=100`,
keys round robin, enough desk keys that no answer is a 429; any non-2xx fails the run) after a
5 s warm-up, against the same corpus and the same `asof` binary:

    sqlite, 1 replica         the baseline (what benches/hot_path.sh measures)
    postgres, 1 replica       the same, the state store a PostgreSQL database on loopback
    postgres, 1 replica behind HAProxy
                              that replica behind HAProxy (both of its server lines naming it)
    postgres, 2 replicas      two replicas on that database behind HAProxy on
                              deploy/haproxy/haproxy.cfg (unchanged, as tests/scale_out runs it)
    sqlite, 1 replica again   the baseline once more, so drift of the machine shows

Besides requests a second, each run reads the CPU time every server process (and HAProxy)
spent from /proc, so the cost per request is known whether or not the processes share cores.
On a machine with fewer cores than processes (two replicas, HAProxy, PostgreSQL and wrk on
two cores here) the replicas share the cores, so a replica's raw share of the throughput says
how the machine was divided, not what a replica on its own machine would serve; what a replica
on a machine of its own serves is the requests it answers per second of its own CPU, which is
the figure compared against the SQLite single replica's.

With `--replica-cpu SHARE` every replica of every run is placed in a CPU cgroup of its own
holding SHARE of one CPU (cgroup v1's `cpu.cfs_quota_us` or v2's `cpu.max`, 10 ms periods): a
replica then serves what a replica with a core of its own that fast would, whatever the other
processes do, so the per-replica throughput of two replicas behind HAProxy can be set beside
the single SQLite replica's on a machine with fewer cores than busy processes. Pick SHARE so
that the replicas' budgets plus HAProxy, PostgreSQL and wrk fit the machine (0.25 on two
cores); each run says how much of its budget a replica used (near 100%: the replica, not the
load, was the limit).

Usage: benches/state_store.py --bin <release asof> --corpus DIR --queries Q.jsonl
           [--duration 20] [--keys 1024] [--pg postgres://postgres@127.0.0.1:5432/test]
           [--replica-cpu SHARE]
Needs wrk and haproxy (Debian's packages; installed when missing) and psql. Prints a Markdown
table, then one JSON object.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import Balancer, Server  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")

LUA = """
local paths, keys = {}, {}
for l in io.lines(os.getenv("PATHS")) do paths[#paths + 1] = l end
for l in io.lines(os.getenv("KEYS")) do keys[#keys + 1] = l end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[math.random(#paths)],
    { ["Authorization"] = "Bearer " .. keys[(n % #keys) + 1] })
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format(
    '{"requests": %d, "requests_per_s": %.1f, "p50_ms": %.3f, "p99_ms": %.3f, "errors": %d}\\n',
    summary.requests, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors))
end
"""


def ensure(tool, package):
    if shutil.which(tool) is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, capture_output=True)


def cpu_seconds(pid):
    """User plus system CPU time of a process (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / TICKS


class CpuBudget:
    """A CPU cgroup of its own holding `share` of one CPU, for one replica (run as root)."""

    PERIOD_US = 10_000

    def __init__(self, share):
        quota = max(1_000, int(share * self.PERIOD_US))
        name = f"asof-bench-{uuid.uuid4().hex[:8]}"
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # cgroup v2
            with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
                f.write("+cpu")
            self.path = f"/sys/fs/cgroup/{name}"
            os.mkdir(self.path)
            with open(f"{self.path}/cpu.max", "w") as f:
                f.write(f"{quota} {self.PERIOD_US}")
        else:  # cgroup v1's cpu controller
            self.path = f"/sys/fs/cgroup/cpu/{name}"
            os.mkdir(self.path)
            with open(f"{self.path}/cpu.cfs_period_us", "w") as f:
                f.write(str(self.PERIOD_US))
            with open(f"{self.path}/cpu.cfs_quota_us", "w") as f:
                f.write(str(quota))

    def add(self, pid):
        """Moves process `pid` (all its threads) into the budget."""
        with open(f"{self.path}/cgroup.procs", "w") as f:
            f.write(str(pid))

    def remove(self):
        """Removes the cgroup (its processes have exited)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def make_keys(binary, db, n):
    """`n` desk keys, each of its own account (a plan's limit is the account's)."""
    def one(i):
        out = subprocess.run(
            [binary, "keys", "create", "--database-url", db, "--email",
             f"state{i}-{uuid.uuid4().hex[:8]}@bench.test", "--plan", "desk"],
            check=True, capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(n)))


def postgres_database(pg):
    name = f"asof_state_bench_{uuid.uuid4().hex[:10]}"
    subprocess.run(["psql", pg, "-q", "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return name, pg.rsplit("/", 1)[0] + "/" + name


def load(base, work, paths, keys, seconds, pids):
    """wrk against `base`: the summary, and the CPU seconds each of `pids` spent meanwhile."""
    env = {**os.environ, "PATHS": paths, "KEYS": keys}
    script = os.path.join(work, "load.lua")
    subprocess.run(["wrk", "-t2", "-c16", "-d5s", "-s", script, base], env=env, check=True,
                   capture_output=True)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    out = subprocess.run(["wrk", "-t2", "-c16", f"-d{seconds}s", "-s", script, base], env=env,
                         check=True, capture_output=True, text=True).stdout
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_s"] = {name: round(after[name] - before[name], 2) for name in pids}
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--keys", type=int, default=1024)
    ap.add_argument("--replica-cpu", type=float, default=None,
                    help="each replica in a CPU cgroup of its own with this share of one CPU")
    ap.add_argument("--pg", default=os.environ.get("ASOF_TEST_POSTGRES_URL",
                                                   "postgres://postgres@127.0.0.1:5432/test"))
    args = ap.parse_args()
    ensure("wrk", "wrk")
    ensure("haproxy", "haproxy")
    qs = [json.loads(line) for line in open(args.queries)]
    runs = {}
    with tempfile.TemporaryDirectory(prefix="asof-state-bench-") as work:
        with open(os.path.join(work, "load.lua"), "w") as f:
            f.write(LUA)
        paths = os.path.join(work, "paths.txt")
        with open(paths, "w") as f:
            for q in qs:
                f.write("/v1/news?" + urllib.parse.urlencode(
                    {"cik": q["cik"], "as_of": q["as_of"], "limit": 100}) + "\n")
        sqlite = f"sqlite://{work}/state.db"
        name, pg = postgres_database(args.pg)
        try:
            t = time.monotonic()
            keys = {}
            for label, db in (("sqlite", sqlite), ("postgres", pg)):
                keys[label] = os.path.join(work, f"keys-{label}.txt")
                with open(keys[label], "w") as f:
                    f.write("\n".join(make_keys(args.bin, db, args.keys)) + "\n")
            print(f"{2 * args.keys} keys made in {time.monotonic() - t:.0f} s", file=sys.stderr)
            quiet = {"ASOF_LOG": "warn"}
            budgets = []

            def budgeted(server):
                """`server`, in a CPU budget of its own with --replica-cpu."""
                if args.replica_cpu:
                    budgets.append(CpuBudget(args.replica_cpu))
                    budgets[-1].add(server.proc.pid)
                return server

            def single(label, db):
                s = budgeted(Server(args.bin, work, corpus=args.corpus, env=quiet, db=db))
                try:
                    return load(s.base, work, paths, keys[label], args.duration, {"replica 1": s.proc.pid})
                finally:
                    s.stop()

            runs["sqlite, 1 replica"] = single("sqlite", sqlite)
            runs["postgres, 1 replica"] = single("postgres", pg)
            # As deploy/ runs them: HAProxy's address is the only one trusted to name the client.
            extra = ["--trusted-proxy", "127.0.0.1"]
            # One replica behind HAProxy (both of the file's server lines naming it): what the
            # proxy in front costs a replica (forwarded headers, its connections), apart from
            # what a second replica beside it does.
            one = budgeted(Server(args.bin, work, corpus=args.corpus, env=quiet, db=pg, extra=extra))
            lb = None
            try:
                lb = Balancer(shutil.which("haproxy"), work, [one.port, one.port])
                runs["postgres, 1 replica behind HAProxy"] = load(
                    lb.base, work, paths, keys["postgres"], args.duration,
                    {"replica 1": one.proc.pid, "haproxy": lb.proc.pid})
            finally:
                if lb:
                    lb.stop()
                one.stop()
            replicas = [budgeted(Server(args.bin, work, corpus=args.corpus, env=quiet, db=pg, extra=extra))
                        for _ in range(2)]
            lb = None
            try:
                lb = Balancer(shutil.which("haproxy"), work, [r.port for r in replicas])
                runs["postgres, 2 replicas behind HAProxy"] = load(
                    lb.base, work, paths, keys["postgres"], args.duration,
                    {"replica 1": replicas[0].proc.pid, "replica 2": replicas[1].proc.pid,
                     "haproxy": lb.proc.pid})
            finally:
                if lb:
                    lb.stop()
                for r in replicas:
                    r.stop()
            runs["sqlite, 1 replica (again)"] = single("sqlite", sqlite)
        finally:
            subprocess.run(["psql", args.pg, "-q", "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                           capture_output=True)
            for b in budgets:
                b.remove()

    base = (runs["sqlite, 1 replica"], runs["sqlite, 1 replica (again)"])
    base_rps = sum(r["requests_per_s"] for r in base) / 2
    base_per_cpu = sum(r["requests"] / r["cpu_s"]["replica 1"] for r in base) / 2
    if args.replica_cpu:
        print(f"Each replica in a CPU budget of {args.replica_cpu:g} of one CPU.\n")
    print("| run | requests/s | per replica | per replica, of SQLite's | p50 | p99 | non-2xx | "
          "replica CPU per request | requests per replica CPU-second | of SQLite's | budget used |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, r in runs.items():
        replicas = [k for k in r["cpu_s"] if k.startswith("replica")]
        cpu = sum(r["cpu_s"][k] for k in replicas)
        per_cpu = r["requests"] / cpu
        per_replica = r["requests_per_s"] / len(replicas)
        r["requests_per_replica_cpu_s"] = per_cpu
        r["of_sqlite"] = per_cpu / base_per_cpu
        r["per_replica_of_sqlite"] = per_replica / base_rps
        # The share of its CPU budget a replica spent (mean of the replicas): with a budget,
        # near 100% says the replica was the limit, not the load or the other processes.
        used = (cpu / len(replicas)) / (args.replica_cpu * args.duration) if args.replica_cpu else None
        r["budget_used"] = used
        print(f"| {label} | {r['requests_per_s']:,.0f} | {per_replica:,.0f} | "
              f"{100 * r['per_replica_of_sqlite']:.1f}% | "
              f"{r['p50_ms']:.3f} ms | {r['p99_ms']:.3f} ms | {r['errors']} | "
              f"{1e6 * cpu / r['requests']:.1f} µs | {per_cpu:,.0f} | {100 * r['of_sqlite']:.1f}% | "
              f"{f'{100 * used:.0f}%' if used else '-'} |")
    lb = runs["postgres, 2 replicas behind HAProxy"]
    print(f"\nSQLite single replica (mean of its two runs): {base_rps:,.0f} requests/s, "
          f"{base_per_cpu:,.0f} per CPU-second; HAProxy spent "
          f"{1e6 * lb['cpu_s']['haproxy'] / lb['requests']:.1f} µs a request")
    print(json.dumps({"runs": runs, "replica_cpu": args.replica_cpu, "sqlite_requests_per_s": base_rps,
                      "sqlite_requests_per_cpu_s": base_per_cpu}))
    if any(r["errors"] for r in runs.values()):
        print("non-2xx answers in a run: the figures do not measure the hot path", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
