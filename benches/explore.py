#!/usr/bin/env python3
"""The explorer's speed (issue 64): the first render of /explore on the public sample and each
step of its slider, end to end in Debian's headless Chromium (Playwright) against the real
binary on loopback, beside baselines measured in the same run and the same page.

first render: a fresh browser context (no cache) opens /explore; the page's own User Timing
  entry `asof-first-render` runs from navigation start to the drawn answer (timeline, list,
  snippets). Baseline: `/health` fetched from the same page (`fetch` round trip).
each step: the slider is focused and moved by the keyboard (ArrowRight: one hour), one step at
  a time; the page's `asof-step` entry runs from the key's input event to the drawn answer
  (request, answer, marks, list, status). Baseline: the same cut URL fetched by the page's
  script alone (the API's part of a step). Steps are 150 ms apart (a person holding an arrow
  key repeats faster; the page then draws only the latest).

Targets: first render under 1 s; each step under 100 ms. Any answer the page drew as an error
other than a hole (429 or 5xx) is counted and fails the run.

Usage: benches/explore.py --bin target/release/asof [--opens 20] [--steps 200]
Prints one JSON object.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests/accounts"))
from support import Server  # noqa: E402
from test_browser import chromium  # noqa: E402

VIEWS = [
    "/explore?example=tesla&as_of=2026-01-26T00:00:00Z",
    "/explore?example=microsoft&as_of=2026-01-26T00:00:00Z&visible_by=committed_at",
    "/explore?example=microsoft&as_of=2026-01-27T00:00:00Z&as_of_start=2026-01-26T00:00:00Z",
]


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 2)


def summary(xs):
    return {"n": len(xs), "p50": pct(xs, 0.5), "p95": pct(xs, 0.95), "max": round(max(xs), 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--opens", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    out = {"machine": os.uname().nodename, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="asof-bench-explore-") as work:
        server = Server(args.bin, work, extra=["--public-rate-limit", "100000"])
        errors = []
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-background-networking"])
                first, health = [], []
                for i in range(args.opens):
                    context = browser.new_context(base_url=server.base)
                    page = context.new_page()
                    page.goto(VIEWS[i % len(VIEWS)])
                    page.wait_for_function("() => performance.getEntriesByName('asof-first-render').length > 0", timeout=20000)
                    first.append(page.evaluate("performance.getEntriesByName('asof-first-render')[0].duration"))
                    health.append(page.evaluate("""async () => {
                        const t = performance.now(); await (await fetch('/health', {cache: 'no-store'})).text();
                        return performance.now() - t; }"""))
                    context.close()
                out["first_render_ms"] = summary(first)
                out["health_fetch_ms"] = summary(health)

                context = browser.new_context(base_url=server.base)
                page = context.new_page()
                steps, api = [], []
                for view in VIEWS:
                    page.goto(view)
                    page.wait_for_function("() => performance.getEntriesByName('asof-first-render').length > 0", timeout=20000)
                    page.focus("#as-of-range")
                    page.evaluate("performance.clearMeasures('asof-step')")
                    n = args.steps // len(VIEWS)
                    for _ in range(n):
                        before = page.evaluate("performance.getEntriesByName('asof-step').length")
                        page.keyboard.press("ArrowRight")
                        page.wait_for_function("n => performance.getEntriesByName('asof-step').length > n", arg=before, timeout=20000)
                        status = page.locator("#status").get_attribute("class")
                        if "error" in status and page.locator("#chart .hole").count() == 0:
                            errors.append(page.locator("#status").text_content())
                        # The API's part alone: the same cut URL, fetched by the page's script.
                        api.append(page.evaluate("""async () => {
                            const u = document.body.dataset.answered; const t = performance.now();
                            await (await fetch(u, {cache: 'no-store', headers: {accept: 'application/json'}})).text();
                            return performance.now() - t; }"""))
                        time.sleep(0.15)
                    steps.extend(page.evaluate("performance.getEntriesByName('asof-step').map(e => e.duration)"))
                out["step_ms"] = summary(steps)
                out["api_fetch_ms"] = summary(api)
                out["step_minus_api_p50_ms"] = round(statistics.median(steps) - statistics.median(api), 2)
                out["errors"] = len(errors)
                browser.close()
        finally:
            server.stop()
    out["targets"] = {
        "first_render_p95_under_1000_ms": out["first_render_ms"]["p95"] < 1000,
        "step_p95_under_100_ms": out["step_ms"]["p95"] < 100,
    }
    print(json.dumps(out, indent=2))
    if errors:
        print(f"errors drawn: {errors[:5]}", file=sys.stderr)
    sys.exit(0 if all(out["targets"].values()) and not errors else 1)


if __name__ == "__main__":
    main()
