"""``asof.connect``: the API over HTTP to a deployment (the standard library's ``urllib`` only).

Repeated pages are asked for with ``If-None-Match`` and a ``304`` answered from the ETags kept
in memory; a ``429`` is waited out (``Retry-After``) and retried, a bounded number of times."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from typing import Dict, Optional, Tuple

from ._api import Answer, Api

#: Pages kept for ``If-None-Match`` (their ETag and bytes), least recently used dropped first.
ETAG_PAGES = 256


class Client(Api):
    """A deployment of the service at ``base_url``. Without ``key`` only the public routes
    answer (``/v1/meta``; the data routes say ``Unauthorized``)."""

    def __init__(
        self,
        base_url: str,
        key: Optional[str] = None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        max_wait: float = 60.0,
        user_agent: str = "asof-python",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = key
        self.timeout = timeout
        self.retries = retries
        self.max_wait = max_wait
        self.user_agent = user_agent
        self._etags: "OrderedDict[str, Tuple[str, bytes]]" = OrderedDict()

    def __repr__(self) -> str:
        return f"<asof.Client {self.base_url}>"

    def _request(self, url: str) -> Tuple[int, Dict[str, str], bytes]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        cached = self._etags.get(url)
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        req = urllib.request.Request(url, headers=headers, method="GET")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                status, got, body = res.status, dict(res.headers.items()), res.read()
        except urllib.error.HTTPError as e:
            status, got, body = e.code, dict(e.headers.items()), e.read()
        got = {k.lower(): v for k, v in got.items()}
        if status == 304 and cached is not None:
            self._etags.move_to_end(url)
            return 200, got, cached[1]
        etag = got.get("etag")
        if status == 200 and etag:
            self._etags[url] = (etag, body)
            self._etags.move_to_end(url)
            while len(self._etags) > ETAG_PAGES:
                self._etags.popitem(last=False)
        return status, got, body

    def _send(self, path: str, query: str) -> Answer:
        url = self.base_url + path + ("?" + query if query else "")
        attempt = 0
        while True:
            status, headers, body = self._request(url)
            retry_after = _seconds(headers.get("retry-after"))
            if status == 429 and attempt < self.retries:
                attempt += 1
                time.sleep(min(self.max_wait, retry_after if retry_after is not None else 1.0))
                continue
            try:
                envelope = json.loads(body)
            except ValueError:
                envelope = {"error": {"code": "not_json", "message": body[:200].decode("utf-8", "replace")}}
            return Answer(status, envelope, retry_after)


def _seconds(value: Optional[str]) -> Optional[float]:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None
