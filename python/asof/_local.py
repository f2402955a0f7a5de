"""``asof.open``: the API over a corpus on disk or in object storage, answered in-process by the
service's own routes and engine (the native module), with no HTTP and no second
implementation: the same refusals, the same pages, the same holes."""

from __future__ import annotations

import json
from typing import Optional

from . import _native
from ._api import Answer, Api
from ._errors import CorpusError


class Corpus(Api):
    """One version of a corpus: the current one of ``location`` (a directory or an
    ``s3://``/``gs://``/``az://`` URL), or the ``version`` given (a ``sha256:…`` corpus version
    the store still holds: time travel). Every answer names this version."""

    def __init__(self, location: str, version: Optional[str] = None) -> None:
        try:
            self._native = _native.LocalCorpus(str(location), version)
        except _native.CorpusError as e:
            raise CorpusError(str(e)) from None
        self.location = str(location)

    @property
    def corpus_version(self) -> str:
        """The corpus version this object answers from."""
        return self._native.corpus_version

    def __repr__(self) -> str:
        return f"<asof.Corpus {self.location} {self.corpus_version}>"

    def _send(self, path: str, query: str) -> Answer:
        status, body = self._native.get(path, query or None)
        return Answer(status, json.loads(body))
