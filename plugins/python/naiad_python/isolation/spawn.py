"""Starting a worker process, with the server's interpreter or a model's own environment's, and the
worker that runs a model's ``auto_complete_config`` when its instances run in workers (kept, when that
succeeds, as the first instance's worker: the model's unit is unloaded in it, so the instance imports
the model afresh, and a load costs one process start less)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

from naiad.backend import ErrorCode, ModelLoadContext, NaiadError
from naiad_python.isolation import environments
from naiad_python.isolation.channel import Channel, ChannelClosed, Message
from naiad_python.isolation.forked import ForkedWorker, fork_worker
from naiad_python.isolation.log_forwarding import log_forwarded

LOAD_TIMEOUT_S = 300.0


WorkerProcess = subprocess.Popen[bytes] | ForkedWorker
Spawned = tuple[WorkerProcess, Channel, Channel]


def spawn_worker(interpreter: Path | None) -> Spawned:
    """A new worker process and the server's ends of its work and control sockets: forked from the
    template process with the server's interpreter, started afresh with a model environment's."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    control, their_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fds = [theirs.fileno(), their_control.fileno()]
    level = logging.getLogger("naiad").getEffectiveLevel()
    arguments = [*map(str, fds), str(level)]
    process: WorkerProcess
    try:
        if interpreter is None:
            process = _fork(fds, level)
        else:  # the model's own environment (EXECUTION_ENV_PATH): its packages first, the server's after
            command = [str(interpreter), "-c", environments.BOOTSTRAP, *arguments]
            variables = {**os.environ, environments.SITE_DIRS_VARIABLE: environments.site_dirs()}
            process = subprocess.Popen(command, pass_fds=fds, start_new_session=True, env=variables)
    except BaseException:
        for sock in (ours, control):
            sock.close()
        raise
    finally:
        theirs.close()
        their_control.close()
    return process, Channel(ours), Channel(control)


def _fork(fds: list[int], level: int) -> ForkedWorker:
    """A worker forked from the template process; a template found dead is started again, once."""
    try:
        return fork_worker(fds, level)
    except ChannelClosed:
        return fork_worker(fds, level)


def auto_complete_in_worker(
    context: ModelLoadContext, model_file: Path, config: dict[str, Any], interpreter: Path | None
) -> tuple[dict[str, Any] | None, Spawned]:
    """Run the model's ``auto_complete_config`` in a new worker; the completed config (Triton's JSON),
    or None when the model has no such method, and the worker, ready for a load (see :func:`retire`)."""
    name = context.model_name
    process, channel, control = spawn_worker(interpreter)
    try:
        channel.send(
            {
                "op": "auto_complete",
                "model_name": name,
                "version": context.version,
                "model_dir": str(context.model_dir),
                "model_file": str(model_file),
                "config": config,
            }
        )
        channel.sock.settimeout(LOAD_TIMEOUT_S)
        answer = _answer(channel, control, name, context.version)
        channel.sock.settimeout(None)
    except (ChannelClosed, TimeoutError):
        retire((process, channel, control))
        raise NaiadError(
            f"python model '{name}': the worker process running its auto_complete_config failed "
            f"(exit status {process.poll()}); see the log above for its output",
            ErrorCode.INTERNAL,
        ) from None
    except BaseException:
        retire((process, channel, control))
        raise
    if answer["op"] == "failed":
        retire((process, channel, control))
        raise NaiadError(answer["message"], ErrorCode[answer["code"]])
    completed: dict[str, Any] | None = answer["config"]
    return completed, (process, channel, control)


def retire(spawned: Spawned) -> None:
    """Stop a worker nobody will use."""
    process, channel, control = spawned
    if process.poll() is None:
        process.kill()
    process.wait()
    channel.close()
    control.close()


def _answer(channel: Channel, control: Channel, name: str, version: int) -> Message:
    """The worker's answer; what it logs meanwhile is logged, server calls are refused."""
    while True:
        message, fds = channel.receive()
        for fd in fds:
            os.close(fd)
        if message["op"] == "log":
            log_forwarded(message, name, version)
        elif message["op"] == "call":
            refusal = ("pb_utils server calls are not available in auto_complete_config", ErrorCode.UNAVAILABLE.name)
            with contextlib.suppress(ChannelClosed):
                control.send({"op": "reply", "call": message["call"], "error": refusal})
        else:
            return message
