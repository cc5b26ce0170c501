"""The worker process of one isolated python-model instance:
``python -m naiad_python.isolation.worker WORK_FD CONTROL_FD LOG_LEVEL``.

It runs a model's ``auto_complete_config`` (a throw-away worker), or loads the model with the same
:class:`~naiad_python.instance.PythonModelInstance` as the in-process mode. Its main thread runs what
arrives on the work socket, in order: the load, each batch and finalize. A batch's requests become
``pb_utils`` requests straight from the server's message (inputs copied out of the server's arena,
responses copied into the worker's), with none of naiad's core request types in between: a
:class:`RunningRequest` is all the worker keeps of each. A second thread reads the
control socket, so releases, cancellations, readiness checks and the server's replies (to ``pb_utils``
calls, BLS responses) are heard while a batch runs. What the worker says goes back on the work socket,
with tensors in the worker's own arena, except the end of a batch of a model that is not decoupled:
that, with the responses its ``execute`` returned (their tensors in a scratch arena of their own), goes
back on the control socket, which the server's event loop polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from naiad.backend import InstanceContext, ModelConfig, NaiadError, settle_heap
from naiad_python import convert, origin
from naiad_python.isolation.arena import ReadArena, ScratchArena, WriteArena
from naiad_python.isolation.bls_client import BlsClient
from naiad_python.isolation.channel import Channel, ChannelClosed, Message
from naiad_python.isolation.log_forwarding import ForwardingHandler
from naiad_python.isolation.remote import RemoteServer, ServerCalls
from naiad_python.pbutils.logger import LOGGER_NAME as MODEL_LOGGER
from naiad_python.pbutils.request import InferenceRequest
from naiad_python.pbutils.response import InferenceResponse, InferenceResponseSender

_log = logging.getLogger("naiad.python")


class RunningRequest:
    """The worker's stand-in for a request of a batch it runs: the server's key for it and whether it
    was cancelled. The model gets the request in ``pb_utils`` form, built from the server's message
    without naiad's core request types in between."""

    __slots__ = ("cancelled", "key")

    def __init__(self, key: int, cancelled: bool) -> None:
        self.key = key
        self.cancelled = cancelled

    def is_cancelled(self) -> bool:
        return self.cancelled


class Worker:
    """Serves one instance until the server says finalize or goes away."""

    def __init__(self, channel: Channel, control: Channel) -> None:
        self.channel = channel  # batches, loads and finalize in; everything the worker says out
        self.control = control  # releases, cancellations and readiness checks in
        self.inputs = ReadArena()
        self.outputs = WriteArena()
        self.returned = ScratchArena()  # the responses of a non-decoupled batch, sent with its end
        self.instance: Any = None
        self.running: dict[int, RunningRequest] = {}
        self.helpers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="naiad-python-worker")
        self._sending = threading.Lock()  # responses from other threads: arena write and send together
        self.calls = ServerCalls(channel)  # pb_utils calls into the server; replies come on the control socket
        self.bls = BlsClient(self.calls, channel, self.outputs, self._key_of)
        # Responses a non-decoupled batch sends on the main thread go out with "executed", in one message.
        self._held: list[tuple[Message, int | None]] | None = None
        self._main = threading.get_ident()

    def serve(self) -> None:
        """Run batches, loads and finalize in order, on this thread; control messages on another."""
        threading.Thread(target=self._control, name="naiad-python-control", daemon=True).start()
        while True:
            message, fds = self._receive(self.channel)
            op = message["op"]
            if op == "execute":
                if fds:
                    self.inputs.adopt(message["arena"], fds[0])
                self._execute(message)
            elif op == "load":
                self._load(message)
            elif op == "auto_complete":
                self._auto_complete(message)
            elif op == "finalize":
                if self.instance is not None:
                    self.instance.finalize()
                self.channel.send({"op": "finalized"})
                return

    def _control(self) -> None:
        """Releases, cancellations, readiness checks and replies to server calls, also while a batch runs."""
        while True:
            message, fds = self._receive(self.control)
            op = message["op"]
            if op == "released":
                self.outputs.released(message["count"])
            elif op == "cancel":
                request = self.running.get(message["key"])
                if request is not None:
                    request.cancelled = True
            elif op == "is_ready":
                self.helpers.submit(self._is_ready, message["token"])
            elif op == "reply":
                self.calls.answered(message)
            elif op == "bls_response":
                self.bls.responded(message, fds)

    @staticmethod
    def _receive(channel: Channel) -> tuple[Message, list[int]]:
        try:
            return channel.receive()
        except ChannelClosed:  # the server is gone: so is this instance, even mid-execute
            os._exit(0)

    def _auto_complete(self, message: Message) -> None:
        from naiad_python.autocomplete import completed_config
        from naiad_python.loader import ModelFileError

        try:
            config = completed_config(
                message["model_name"],
                message["version"],
                Path(message["model_dir"]),
                Path(message["model_file"]),
                message["config"],
                None,
            )
        except NaiadError as error:
            self.channel.send({"op": "failed", "message": error.message, "code": error.code.name})
            return
        except ModelFileError as error:
            self.channel.send({"op": "failed", "message": str(error), "code": "NOT_FOUND"})
            return
        self.channel.send({"op": "auto_completed", "config": config})

    def _load(self, message: Message) -> None:
        from naiad_python.backend_model import PythonModel
        from naiad_python.instance import PythonModelInstance

        context = InstanceContext(
            model_name=message["model_name"],
            version=message["version"],
            model_dir=Path(message["model_dir"]),
            name=message["name"],
            kind=message["kind"],
            device_id=message["device_id"],
            config=ModelConfig.FromString(message["config"]),
            config_json=message["config_json"],
            group=message["group"],
            group_index=message["group_index"],
            index=message["index"],
            server=RemoteServer(self.calls, self.bls.submit),  # type: ignore[arg-type]  # what pb_utils uses
        )
        model = PythonModel.__new__(PythonModel)
        model.name, model.version = context.model_name, context.version
        model.model_dir, model.model_file = context.model_dir, Path(message["model_file"])
        try:
            # every response is copied into an arena as it is sent: no copy of the model's outputs before
            self.instance = PythonModelInstance(model, context, copy_outputs=False)
        except NaiadError as error:
            self.channel.send({"op": "failed", "message": error.message, "code": error.code.name})
            return
        settle_heap()  # this process serves the model from now on
        self.channel.send({"op": "loaded"})

    def _execute(self, message: Message) -> None:
        decoupled = self.instance.decoupled
        served, batch = [], []
        for entry in message["requests"]:
            request = RunningRequest(entry["key"], entry["cancelled"])
            self.running[request.key] = request
            served.append(request)
            batch.append(self._received(message["arena"], entry, request, decoupled))
        if not decoupled:
            self.returned.begin_batch()
            self._held = []
        try:
            with origin.serving_in_worker(served):  # BLS requests made inside name these as their parents
                self.instance.execute_received(batch, _timed_by_the_server)
        finally:
            held, self._held = self._held or [], None
            fds = [fd for _, fd in held if fd is not None]
            executed = {"op": "executed", "batch": message["batch"]}
            executed["responses"] = [reply for reply, _ in held]
            executed["rescheduled"] = [index for index, request in enumerate(batch) if request._rescheduled()]
            if not decoupled:  # requests the model answers after execute returned, from a thread of its own
                executed["later"] = [index for index, request in enumerate(batch) if request._answered_later()]
            for index in executed["rescheduled"]:  # runs again as a new request of a later batch
                self.running.pop(served[index].key, None)
            try:  # a decoupled batch's end follows the responses it sent, on the same socket
                (self.channel if decoupled else self.control).send(executed, fds or None)
            finally:
                for fd in fds:
                    os.close(fd)

    def _received(self, arena: int, entry: Message, request: RunningRequest, decoupled: bool) -> InferenceRequest:
        """The ``pb_utils.InferenceRequest`` ``execute`` gets for one request of the server's message."""
        requested = entry["outputs"] or self.instance.config_outputs
        sender = InferenceResponseSender(
            partial(self._deliver, request.key, frozenset(requested)),
            decoupled=decoupled,
            is_cancelled=request.is_cancelled,
        )
        return InferenceRequest._received(
            request_id=entry["id"],
            correlation_id=entry["correlation_id"],
            inputs=[convert.arena_input(*input) for input in self.inputs.arrays(arena, entry["inputs"], copy=True)],
            requested_output_names=list(requested),
            model_name=entry["model_name"],
            model_version=entry["model_version"],
            flags=entry["flags"],
            timeout=entry["timeout_us"],
            parameters=convert.request_parameters(entry["parameters"]),
            sender=sender,
            is_cancelled=request.is_cancelled,
        )

    @staticmethod
    def _key_of(served: RunningRequest) -> int:
        """The server's key for a request of the running batch, so the server knows a BLS parent."""
        return served.key

    def _send(self, reply: Message, fd: int | None) -> None:
        try:
            self.channel.send(reply, None if fd is None else [fd])
        finally:
            if fd is not None:
                os.close(fd)

    def _deliver(self, key: int, requested: frozenset[str], response: InferenceResponse | None, final: bool) -> None:
        """Send one response (or a flag-only final) of request ``key`` to the server, keeping only the
        ``requested`` outputs; the model's arrays are copied into an arena before this returns."""
        holding = self._held is not None and threading.get_ident() == self._main
        reply: Message = {"op": "response", "key": key, "final": final}
        outputs = []
        if response is not None:
            error = response.error()
            if error is not None:
                reply["error"] = (error.message(), error.code().name)
                reply["fails_request"] = response._backend_failure
            else:
                outputs = [
                    convert.output_tensor(tensor, copy=False)
                    for tensor in response.output_tensors()
                    if tensor.name() in requested
                ]
            reply["parameters"] = dict(response._parameter_dict())
        if holding:  # sent with the batch's end; its tensors in the scratch arena
            assert self._held is not None
            fd = None
            if outputs:
                reply["arena"], reply["outputs"], fd = self.returned.write(outputs)
            self._held.append((reply, fd))
        else:  # written and sent in one step: a message naming a new arena never overtakes its descriptor
            with self._sending, contextlib.suppress(ChannelClosed):  # the server is gone, and the request
                fd = None
                if outputs:
                    reply["arena"], reply["outputs"], fd = self.outputs.write(outputs)
                self._send(reply, fd)
        if final:
            self.running.pop(key, None)

    def _is_ready(self, token: int) -> None:
        ready = bool(self.instance is not None and asyncio.run(self.instance.is_ready()))
        self.channel.send({"op": "ready", "token": token, "value": ready})


def _timed_by_the_server(start_ns: int, end_ns: int) -> None:
    """A worker's batch is timed by the server, from sending it to its end coming back (as Triton's
    python backend times a stub's), so the worker's own timing goes nowhere."""


def main(arguments: Sequence[str]) -> None:
    """Serve with ``WORK_FD CONTROL_FD LOG_LEVEL``."""
    channel = Channel(socket.socket(fileno=int(arguments[0])))
    control = Channel(socket.socket(fileno=int(arguments[1])))
    logging.basicConfig(level=int(arguments[2]), handlers=[ForwardingHandler(channel)])
    # What the model logs through pb_utils.Logger goes to the server at every level, as from Triton's
    # stub: the server's settings, which /v2/logging changes at run time, decide what is written.
    logging.getLogger(MODEL_LOGGER).setLevel(logging.DEBUG)
    sys.argv = [""]  # what a model sees in Triton's stub: unittest.main() and argparse find no arguments
    started = time.monotonic()
    try:
        Worker(channel, control).serve()
    finally:
        _log.debug("python worker exits after %.1f s", time.monotonic() - started)
        channel.close()
        control.close()


if __name__ == "__main__":
    main(sys.argv[1:])
