"""The batch a python model's ``execute`` serves: the parent of the BLS requests made for it.

:func:`serving` marks the batch for the code that runs inside it: ``execute`` itself, the
coroutines it awaits, the tasks it starts (they copy the context) and threads it starts in a copied
context (``contextvars.copy_context().run``). A BLS request made there is a child of the batch: it
inherits the batch's lineage, for the server's cycle check, and its cancellation.

A batch of one request is that request. A batch of several is stood for by a parent whose lineage
joins theirs and which is cancelled once every request of the batch is: a BLS call may serve any of
them, so it stops only when none is left to serve. In a worker process the requests are the worker's
stand-ins for the server's, and the server builds the parent: there, :func:`current_parent` is None.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextvars import ContextVar, Token
from typing import Any

from naiad.backend import CancellationToken, InferenceRequest, ResponseEvent, ResponseSender


class _Batch:
    """The requests of one ``execute`` call and, once asked for, their parent."""

    __slots__ = ("_parent", "_requests", "_server_builds_parent")

    def __init__(self, requests: Sequence[Any], server_builds_parent: bool) -> None:
        self._requests = requests
        self._server_builds_parent = server_builds_parent
        self._parent: InferenceRequest | None = None

    @property
    def requests(self) -> Sequence[Any]:
        return self._requests

    def parent(self) -> InferenceRequest | None:
        if self._parent is None and not self._server_builds_parent:
            self._parent = parent_of(self._requests)
        return self._parent


_current: ContextVar[_Batch | None] = ContextVar("naiad_python_batch", default=None)


class _Serving:
    """The block in which code serves a batch (a plain class: entered once per batch)."""

    __slots__ = ("_batch", "_token")

    def __init__(self, batch: _Batch) -> None:
        self._batch = batch

    def __enter__(self) -> None:
        self._token: Token[_Batch | None] = _current.set(self._batch)

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)


def serving(requests: Sequence[InferenceRequest]) -> _Serving:
    """Code run inside the block (``with serving(requests):``) serves ``requests``."""
    return _Serving(_Batch(requests, server_builds_parent=False))


def serving_in_worker(requests: Sequence[Any]) -> _Serving:
    """Code run inside the block serves ``requests``, a worker's stand-ins for the server's requests."""
    return _Serving(_Batch(requests, server_builds_parent=True))


def current_parent() -> InferenceRequest | None:
    """The request the running code serves, or None outside any ``execute``'s context (or in a worker)."""
    batch = _current.get()
    return None if batch is None else batch.parent()


def current_batch() -> Sequence[Any]:
    """The requests the running code serves (none outside any ``execute``'s context)."""
    batch = _current.get()
    return () if batch is None else batch.requests


def parent_of(requests: Sequence[InferenceRequest]) -> InferenceRequest:
    """The parent of BLS requests made for ``requests``: the request itself, or one standing for them all."""
    return requests[0] if len(requests) == 1 else _batch_parent(requests)


class _Countdown:
    """Cancels ``token`` once :meth:`tick` has been called ``count`` times, from any threads."""

    __slots__ = ("_count", "_lock", "_token")

    def __init__(self, count: int, token: CancellationToken) -> None:
        self._count = count
        self._token = token
        self._lock = threading.Lock()

    def tick(self) -> None:
        with self._lock:
            self._count -= 1
            finished = self._count == 0
        if finished:
            self._token.cancel()


def _discard(event: ResponseEvent) -> None:
    """The stand-in parent is never answered."""


def _batch_parent(requests: Sequence[InferenceRequest]) -> InferenceRequest:
    """A request standing for a batch of several: the parent of the BLS requests made for it."""
    cancellation = CancellationToken()
    countdown = _Countdown(len(requests), cancellation)
    for request in requests:
        request.cancellation.add_callback(countdown.tick)
    first = requests[0]
    return InferenceRequest(
        model_name=first.model_name,
        model_version=first.model_version,
        inputs={},
        requested_outputs={},
        sender=ResponseSender(_discard, cancellation=cancellation),
        lineage=tuple(dict.fromkeys(name for request in requests for name in request.lineage)),
    )
