"""``Client.download()``: the flat files of a corpus version (its Parquet partitions, listed by
``/v1/files`` with signed URLs) written under a local directory at their corpus paths, each
checked against the sha256 and size the listing gives before it is kept."""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from typing import Any, Dict, Iterable, List

from ._errors import IntegrityError

#: Bytes read from the network per write.
CHUNK = 1 << 20


def download(files: Iterable[Dict[str, Any]], directory: str, *, timeout: float, user_agent: str) -> List[str]:
    """Writes each listed file under ``directory`` at its ``path``; returns the local paths in
    listing order. A file already there with the listed sha256 is kept as it is (a second run
    fetches only what is missing). A file is written to a temporary name, hashed as it
    arrives, and renamed into place only when its sha256 and size match the listing: otherwise
    :class:`asof.IntegrityError` is raised and nothing is left at its path."""
    root = os.path.abspath(directory)
    written = []
    for f in files:
        target = os.path.abspath(os.path.join(root, *str(f["path"]).split("/")))
        if os.path.commonpath([root, target]) != root:
            raise IntegrityError(str(f["path"]), "a path under the download directory", target)
        if not (os.path.exists(target) and _sha256_of(target) == f["sha256"]):
            _fetch(str(f["url"]), target, str(f["sha256"]), int(f["bytes"]), timeout, user_agent)
        written.append(target)
    return written


def _fetch(url: str, target: str, sha256: str, size: int, timeout: float, user_agent: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".asof-", suffix=".part", dir=os.path.dirname(target))
    try:
        digest = hashlib.sha256()
        got = 0
        req = urllib.request.Request(url, headers={"User-Agent": user_agent})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(req, timeout=timeout) as res:
            while True:
                chunk = res.read(CHUNK)
                if not chunk:
                    break
                digest.update(chunk)
                got += len(chunk)
                out.write(chunk)
        found = digest.hexdigest()
        if found != sha256 or got != size:
            raise IntegrityError(target, f"{sha256} ({size} bytes)", f"{found} ({got} bytes)")
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
