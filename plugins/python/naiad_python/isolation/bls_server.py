"""The server side of BLS from a worker: the requests one worker submitted, and their responses going back.

Responses go to the worker on its control socket, their tensors in an arena of their own (the worker
copies them out and releases each at once, so this arena never waits for a batch to end). A worker
that goes away takes its requests with it: they are cancelled.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from naiad.backend import InferenceRequest, ResponseEvent, Scheduling, ServerHandle, Tensor
from naiad_python.isolation.arena import WriteArena
from naiad_python.isolation.channel import Channel, ChannelClosed, Message


class BlsRequests:
    """The BLS requests of one worker, submitted on its behalf."""

    def __init__(self, control: Channel) -> None:
        self._control = control
        self._arena = WriteArena()
        self._lock = threading.Lock()
        self._requests: dict[int, InferenceRequest] = {}
        self._finished: set[int] = set()  # ended before submit returned

    def submit(
        self, server: ServerHandle, request: Message, inputs: Sequence[Tensor], parent: InferenceRequest | None
    ) -> None:
        """Queue the worker's request (``request``: what the worker sent); raises the server's refusal."""
        bls_id = request["bls"]
        submitted = server.submit(
            request["model"],
            inputs,
            _Sink(self, bls_id),
            version=request["version"],
            outputs=request["outputs"],
            request_id=request["request_id"],
            parameters=request["parameters"],
            scheduling=None if request["scheduling"] is None else Scheduling(*request["scheduling"]),
            parent=parent,
            refuse_decoupled=request["refuse_decoupled"],
        )
        with self._lock:
            if bls_id in self._finished:
                self._finished.discard(bls_id)
            else:
                self._requests[bls_id] = submitted

    def deliver(self, bls_id: int, event: ResponseEvent) -> None:
        """Send one response event to the worker (any thread)."""
        message: Message = {"op": "bls_response", "bls": bls_id, "final": event.final}
        fd = None
        response = event.response
        if response is not None:
            message["parameters"] = dict(response.parameters)
            if response.error is not None:
                message["error"] = (response.error.message, response.error.code.name)
            message["arena"], message["outputs"], fd = self._arena.write(response.outputs)
        if event.final:
            with self._lock:
                if self._requests.pop(bls_id, None) is None:
                    self._finished.add(bls_id)
        try:
            self._control.send(message, None if fd is None else [fd])
        except ChannelClosed:
            self.cancel(bls_id)  # the worker is gone: nobody waits for the rest
        finally:
            if fd is not None:
                os.close(fd)

    def released(self) -> None:
        """The worker copied one response's tensors out."""
        self._arena.released()

    def cancel(self, bls_id: int) -> None:
        with self._lock:
            request = self._requests.get(bls_id)
        if request is not None:
            request.cancel()

    def close(self) -> None:
        """The worker is gone: cancel what it asked for, free the arena."""
        with self._lock:
            requests, self._requests = list(self._requests.values()), {}
        for request in requests:
            request.cancel()
        self._arena.close()


class _Sink:
    """Where the server delivers one BLS request's responses."""

    __slots__ = ("_bls_id", "_requests")

    def __init__(self, requests: BlsRequests, bls_id: int) -> None:
        self._requests = requests
        self._bls_id = bls_id

    def deliver(self, event: ResponseEvent) -> None:
        self._requests.deliver(self._bls_id, event)
