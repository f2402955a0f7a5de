#!/usr/bin/env python3
"""Writes a synthetic GLEIF golden copy for benches/golden_copy.sh: N LEI records in GLEIF's
LEI-CDF CSV layout, each a copy of one of the 94 real-derived records under
snapshots/sources/gleif.lei/golden_copy_from_api with its own valid LEI and name.

  golden_copy_gen.py N OUT.csv [--next]

--next writes the following golden copy of the same list: every 200th LEI modified (its legal
address city), every 2,000th (offset 1) gone, and N/1,000 new LEIs at the end.
"""
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(
    HERE, "..", "snapshots", "sources", "gleif.lei", "golden_copy_from_api",
    "20250515-0000-gleif-goldencopy-lei2-golden-copy.csv")


def lei(i):
    base = f"984500{i:012d}"
    digits = "".join(str(int(c, 36)) for c in base) + "00"
    return f"{base}{98 - int(digits) % 97:02d}"


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    nxt = "--next" in sys.argv[3:]
    with open(TEMPLATE, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, records = rows[0], rows[1:]
    at = {c: i for i, c in enumerate(header)}
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
        w.writerow(header)
        total = n + (n // 1000 if nxt else 0)
        for i in range(total):
            if nxt and i < n and i % 2000 == 1:
                continue
            r = list(records[i % len(records)])
            r[at["LEI"]] = lei(i)
            r[at["Entity.LegalName"]] = f"{r[at['Entity.LegalName']]} {i}"
            if nxt and i < n and i % 200 == 0:
                r[at["Entity.LegalAddress.City"]] = "MOVED " + r[at["Entity.LegalAddress.City"]]
            w.writerow(r)


if __name__ == "__main__":
    main()
