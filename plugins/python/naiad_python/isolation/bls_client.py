"""BLS from a worker process: ``InferenceRequest.exec()`` and ``async_exec()`` submitted by the server.

A BLS request's inputs go in the worker's arena with a ``submit`` call, which the server answers once it
queued the request (or refused it); the request's responses come back on the control socket, their
tensors in a server arena of their own that the worker copies from and releases at once, so responses
never wait for the batch that asked for them. The server submits with the batch's request as parent,
so the BLS request is cancelled with it and takes part in the cycle check, as in the server process:
the worker names the requests of the batch it serves, the server builds their parent as
:mod:`naiad_python.origin` does in the server process.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple
from typing import Any

from naiad.backend import (
    ErrorCode,
    InferenceRequest,
    InferenceResponse,
    NaiadError,
    ParameterValue,
    RequestedOutput,
    ResponseEvent,
    ResponseSink,
    Scheduling,
    Tensor,
)
from naiad_python import origin
from naiad_python.isolation.arena import ReadArena, WriteArena
from naiad_python.isolation.channel import Channel, ChannelClosed, Message
from naiad_python.isolation.remote import ServerCalls


class RemoteRequest:
    """A BLS request the server runs; ``cancel`` reaches it there."""

    def __init__(self, client: BlsClient, request_id: int) -> None:
        self._client = client
        self._id = request_id

    def cancel(self) -> None:
        self._client.cancel(self._id)


class BlsClient:
    """Submits BLS requests through the server and hands their responses to their sinks (worker side)."""

    def __init__(
        self,
        calls: ServerCalls,
        channel: Channel,
        arena: WriteArena,
        key_of: Callable[[Any], int],
    ) -> None:
        self._calls = calls
        self._channel = channel
        self._arena = arena  # the worker's arena, shared with the responses it sends
        self._key_of = key_of  # the server's key for a request of the running batch
        self._ids = itertools.count(1)
        self._sinks: dict[int, ResponseSink] = {}
        self._lock = threading.Lock()
        self._responses = ReadArena()  # read on the control thread only

    def submit(
        self,
        model: str,
        inputs: Sequence[Tensor],
        sink: ResponseSink,
        *,
        version: str | int = "",
        outputs: Sequence[RequestedOutput | str] = (),
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        scheduling: Scheduling | None = None,
        parent: InferenceRequest | None = None,
        refuse_decoupled: str | None = None,
    ) -> RemoteRequest:
        """Have the server queue the request (raises its refusal); responses go to ``sink``. The server
        finds ``parent`` itself, from the batch the calling code serves."""
        bls_id = next(self._ids)
        request: Message = {  # built before the inputs take arena space: nothing may fail in between
            "bls": bls_id,
            "model": model,
            "version": version,
            "outputs": [output if isinstance(output, str) else output.name for output in outputs],
            "request_id": request_id,
            "parameters": dict(parameters or {}),
            "scheduling": None if scheduling is None else astuple(scheduling),
            "parent": [self._key_of(served) for served in origin.current_batch()],
            "refuse_decoupled": refuse_decoupled,
        }
        request["arena"], request["inputs"], fd = self._arena.write(inputs)
        with self._lock:
            self._sinks[bls_id] = sink
        try:
            self._calls.call("submit", request, fds=None if fd is None else [fd])
        except NaiadError:
            with self._lock:
                self._sinks.pop(bls_id, None)
            raise
        return RemoteRequest(self, bls_id)

    def cancel(self, bls_id: int) -> None:
        with contextlib.suppress(ChannelClosed):  # the server is gone, and with it the request
            self._channel.send({"op": "bls_cancel", "bls": bls_id})

    def responded(self, message: Message, fds: list[int]) -> None:
        """A response event of a BLS request (control thread): copy its tensors, release them, deliver."""
        response = None
        if "parameters" in message:
            outputs: list[Tensor] = []
            if "arena" in message:
                if fds:
                    self._responses.adopt(message["arena"], fds[0])
                outputs = self._responses.tensors(message["arena"], message["outputs"], copy=True)
                try:
                    self._channel.send({"op": "bls_released"})
                except ChannelClosed:
                    return
            error = None
            if "error" in message:
                text, code = message["error"]
                error = NaiadError(text, ErrorCode[code])
            response = InferenceResponse(outputs, error, message["parameters"])
        with self._lock:
            sink = self._sinks.pop(message["bls"], None) if message["final"] else self._sinks.get(message["bls"])
        if sink is not None:
            sink.deliver(ResponseEvent(response, message["final"]))
