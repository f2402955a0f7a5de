"""The wheel as a user downloads it: run by `scripts/test-all` in a fresh virtual environment
holding nothing but the wheel `maturin build` made (no pyarrow, pandas or polars: the package
declares no dependencies), from outside the repository's `python/` folder, so the `asof` that
answers is the installed one.

Checks that the installed module answers a cut of the repository's shipped sample as records,
refuses a hole as `asof.CoverageMissing` with its keys, and names the corpus version it read.

    python tests/python/test_wheel.py --repo . --venv /path/to/fresh/venv
"""

import argparse
import os
import sys


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, help="the repository root (its sample corpus)")
    ap.add_argument("--venv", required=True, help="the fresh environment the wheel went into")
    a = ap.parse_args()

    import asof
    import asof._native as native

    venv = os.path.realpath(a.venv)
    for module in (asof, native):
        where = os.path.realpath(module.__file__)
        check(where.startswith(venv + os.sep), f"{module.__name__} is the installed one: {where}")
    for frame_library in ("pyarrow", "pandas", "polars"):
        try:
            __import__(frame_library)
        except ImportError:
            continue
        check(False, f"the fresh environment holds only the wheel, not {frame_library}")

    corpus = asof.open(a.repo)
    version = corpus.meta()["corpus"]["corpus_version"]
    check(version.startswith("sha256:") and len(version) == 71, f"a corpus version: {version}")
    rows = corpus.news(ticker="TSLA", as_of="2026-01-29T12:00:00Z").records()
    check(len(rows) > 0, "TSLA's filings as of 2026-01-29")
    check(all(r["cik"] == "1318605" for r in rows), "every row is Tesla's")
    check(
        all(r["published_at"] <= "2026-01-29T12:00:00Z" for r in rows),
        "no row published after the cut",
    )
    try:
        corpus.news(ticker="TSLA", as_of="2099-01-01T00:00:00Z").records()
        check(False, "a cut past the corpus is a hole, not an answer")
    except asof.CoverageMissing as hole:
        check(len(hole.missing) > 0, "the hole names its missing keys")
    print(f"the wheel answers from {version}: {len(rows)} rows, holes refused")


if __name__ == "__main__":
    main()
