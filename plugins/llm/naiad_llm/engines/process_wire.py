"""The messages between the server and an engine process: pickled tuples, each behind its length.

The child's command line: ``python -m naiad_llm.engines.process_child FD [CPUS]``, ``CPUS`` the CPUs
it keeps to as ``1,2,3`` (:func:`cpu_list`).

Server to engine: ``("start", engine, settings, log_level)``, ``("add", request)``, ``("abort", id)``,
``("log_level", level)`` (the server's changed, through ``/v2/logging``), ``("stop",)``. Engine to
server: ``("ready", info)`` or ``("failed", message, code)`` once; ``("outputs", [(id,
output_fields), ...], stats or None)``, ``("error", id, message, code)`` and ``("log", level,
logger, text)`` as they come. Both ends are the same program, so pickle is safe.
An output travels as the tuple of its fields: pickle takes a seventh of the time a dataclass with
slots costs it, and every token pays it on both ends.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

from naiad_llm.engine import GenerationOutput

_HEADER = struct.Struct("!I")
OutputFields = tuple[Any, ...]


def output_fields(output: GenerationOutput) -> OutputFields:
    """``output`` as the tuple that crosses the socket."""
    return (
        output.text,
        output.token_ids,
        output.num_input_tokens,
        output.num_output_tokens,
        output.finished,
        output.finish_reason,
        output.cumulative_logprob,
        output.logprobs,
    )


def output_from(fields: OutputFields) -> GenerationOutput:
    """The output :func:`output_fields` made ``fields`` of."""
    return GenerationOutput(*fields)


def frame(message: Any) -> bytes:
    """``message`` as bytes to write to the socket."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class Frames:
    """Splits what a socket delivers into the messages it carries."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        """The messages that ``data`` completes, in order."""
        self._buffer += data
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            end = _HEADER.size + size
            if len(self._buffer) < end:
                break
            messages.append(pickle.loads(self._buffer[_HEADER.size : end]))
            del self._buffer[:end]
        return messages


def cpu_list(cpus: list[int]) -> str:
    """``cpus`` as the child's command line names them."""
    return ",".join(str(cpu) for cpu in cpus)


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs :func:`cpu_list` wrote as ``text``."""
    return [int(cpu) for cpu in text.split(",")]
