#!/usr/bin/env python3
"""Says whether the virtual environment running it is whole: exit 0 when every pin of the
given requirements file is installed at its version and every file any installed
distribution recorded (its RECORD: modules, console scripts such as schemathesis' `st`) is
still on disk; else exit 1 naming what is wrong, so scripts/test-all rebuilds the venv.

A venv kept beside a reused target directory can lose files (a cache restore, a cleaner, an
interrupted install) while its `.installed` marker stays: a CI run once failed on a missing
`bin/st` in such a venv. Checking the files costs well under a second.
"""

import importlib.metadata as md
import os
import re
import sys


def pins(path):
    """`name==version` lines of a requirements file (comments and blanks skipped)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def problems(requirements):
    found = []
    for name, version in pins(requirements).items():
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            found.append(f"{name} is not installed")
            continue
        if have != version:
            found.append(f"{name} is {have}, the requirements pin {version}")
    for dist in md.distributions():
        for f in dist.files or []:
            p = dist.locate_file(f)
            # .pyc files are caches the interpreter writes again; RECORD lists some of them.
            if not str(f).endswith(".pyc") and not os.path.exists(p):
                found.append(f"{dist.metadata['Name']}: {f} is missing")
                break
    return found


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: venv_ok.py REQUIREMENTS_FILE")
    bad = problems(sys.argv[1])
    for b in bad:
        print("venv:", b, file=sys.stderr)
    sys.exit(1 if bad else 0)
