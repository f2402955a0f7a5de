"""``Client.stream()``: new records as they are published, over the service's server-sent events
(``GET /v1/stream``), resumed with ``Last-Event-ID`` whenever the connection drops, so a
reader sees every record once, in order, across reconnects and server restarts."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._errors import StreamGap, error_of

#: Seconds without a byte after which the connection is taken for dead (the service sends a
#: keep-alive comment every 15 s while idle).
IDLE_TIMEOUT = 45.0


class Stream:
    """An iterator of news records (dicts shaped like the REST record), each published after
    the stream opened (or after ``last_event_id``). ``last_event_id`` is the id of the last
    event read: pass it to a later ``stream(last_event_id=...)`` to continue where this one
    stopped. Close it with :meth:`close` (or use it as a context manager).

    When the connection ends (the server restarts, a proxy cuts it, the network drops) it
    reconnects with ``Last-Event-ID`` and the service replays what came after; ``reconnects``
    bounds how many consecutive failed attempts are made before the error is raised.

    A ``bulk`` or ``reset`` event means records were not sent one by one: with ``on_gap`` unset
    the iterator raises :class:`asof.StreamGap` (never a silent gap); with ``on_gap`` it is
    called with the exception and the stream goes on."""

    def __init__(
        self,
        url: str,
        headers: Dict[str, str],
        *,
        last_event_id: Optional[str] = None,
        on_gap: Optional[Callable[[StreamGap], None]] = None,
        reconnects: int = 5,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.url = url
        self._headers = headers
        self.last_event_id = last_event_id
        self._on_gap = on_gap
        self._reconnects = reconnects
        self._idle_timeout = idle_timeout
        self._delay = 1.0
        self._response: Any = None
        self._closed = False
        #: How many times the stream connected (1 for a stream that never dropped).
        self.connections = 0
        # Connected now, so every record published after this call is read (and a refusal,
        # such as a key without the plan, is raised here, not at the first read).
        self._response = self._open()
        self._events = self._run()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Dict[str, Any]:
        return next(self._events)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection; the iterator then ends."""
        self._closed = True
        if self._response is not None:
            try:
                self._response.close()
            except OSError:
                pass

    def _open(self) -> Any:
        headers = dict(self._headers)
        headers["Accept"] = "text/event-stream"
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        req = urllib.request.Request(self.url, headers=headers, method="GET")
        failures = 0
        while True:
            try:
                response = urllib.request.urlopen(req, timeout=self._idle_timeout)
                self.connections += 1
                return response
            except urllib.error.HTTPError as e:
                body = e.read()
                retry_after = _seconds(e.headers.get("Retry-After"))
                if e.code in (429, 503) and failures < self._reconnects:
                    failures += 1
                    time.sleep(retry_after if retry_after is not None else self._delay)
                    continue
                try:
                    envelope = json.loads(body)
                except ValueError:
                    envelope = {"error": {"code": "not_json", "message": body[:200].decode("utf-8", "replace")}}
                raise error_of(e.code, envelope, retry_after) from None
            except (OSError, urllib.error.URLError):
                if failures >= self._reconnects:
                    raise
                failures += 1
                time.sleep(self._delay * failures)

    def _run(self) -> Iterator[Dict[str, Any]]:
        failures = 0
        first = True
        while not self._closed:
            if not first:
                self._response = self._open()
            first = False
            failures += 1  # until this connection delivers an event
            if failures > self._reconnects + 1:
                raise ConnectionError(f"{self.url}: the stream ended {failures - 1} times in a row without an event")
            try:
                for event, data, event_id in _events(self._response):
                    failures = 0
                    if event_id is not None:
                        self.last_event_id = event_id
                    if event == "retry":
                        self._delay = max(0.1, int(data) / 1000.0)
                    elif event == "record":
                        yield json.loads(data)
                    elif event in ("bulk", "reset"):
                        gap = StreamGap(event, json.loads(data or "{}"), self.last_event_id)
                        if self._on_gap is None:
                            raise gap
                        self._on_gap(gap)
            except ValueError:
                if self._closed:  # read after close() from another thread
                    return
                raise
            except (OSError, socket.timeout) as e:
                # A dropped or idle connection: reconnect below, with Last-Event-ID.
                if self._closed:
                    return
                if failures > self._reconnects:
                    raise e
            finally:
                try:
                    self._response.close()
                except OSError:
                    pass
            if not self._closed:
                time.sleep(self._delay)


def _events(response: Any) -> Iterator[Tuple[str, str, Optional[str]]]:
    """The events of an SSE body as ``(event, data, id)`` (WHATWG parsing: ``data`` lines
    joined by newlines, comments skipped, ``retry`` reported as an event of its own)."""
    event, event_id = "message", None
    data: List[str] = []
    while True:
        raw = response.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data), event_id
            event, event_id = "message", None
            data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id" and "\0" not in value:
            event_id = value
        elif name == "retry" and value.isdigit():
            yield "retry", value, None


def _seconds(value: Optional[str]) -> Optional[float]:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None
