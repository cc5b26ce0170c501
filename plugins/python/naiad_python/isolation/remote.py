"""The server as a worker process sees it: the ``ServerHandle`` calls ``pb_utils`` makes, answered by the server.

A model in a worker calls ``pb_utils.is_model_ready``, ``load_model``, ``unload_model`` and the custom
metric APIs exactly as in the server process (BLS too: :mod:`naiad_python.isolation.bls_client`); each
call becomes a ``call`` message on the work socket and waits for its ``reply``, which the worker's
control thread hands over (so a call made inside ``execute`` is answered while ``execute`` runs). The
server's errors come back as the same :class:`~naiad.backend.NaiadError`, so ``pb_utils`` reports them
as it does in the server process.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from naiad.backend import ErrorCode, MetricKind, ModelConfig, NaiadError
from naiad_python.isolation.channel import Channel, ChannelClosed, Message


class ServerCalls:
    """Sends calls to the server and matches its replies to them (any thread may call)."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()

    def call(self, op: str, *args: Any, fds: list[int] | None = None) -> Any:
        """Run ``op`` in the server and return its result; raise the server's error. ``fds`` go along
        (and are closed here)."""
        call_id = next(self._ids)
        future: Future[Any] = Future()
        with self._lock:
            self._waiting[call_id] = future
        try:
            self._channel.send({"op": "call", "call": call_id, "name": op, "args": args}, fds)
        except ChannelClosed:
            with self._lock:
                self._waiting.pop(call_id, None)
            raise NaiadError("the server went away", ErrorCode.UNAVAILABLE) from None
        finally:
            for fd in fds or ():
                os.close(fd)
        return future.result()

    def answered(self, message: Message) -> None:
        """The server's ``reply`` to a call: wake its caller with the value or the error."""
        with self._lock:
            future = self._waiting.pop(message["call"], None)
        if future is None:
            return
        if "error" in message:
            text, code = message["error"]
            future.set_exception(NaiadError(text, ErrorCode[code]))
        else:
            future.set_result(message.get("value"))


class RemoteMetric:
    """One series of a server family (see :class:`naiad.metrics.custom.Metric`)."""

    def __init__(self, calls: ServerCalls, metric_id: int) -> None:
        self._calls = calls
        self._id = metric_id

    def increment(self, value: float) -> None:
        self._calls.call("metric", self._id, "increment", value)

    def set(self, value: float) -> None:
        self._calls.call("metric", self._id, "set", value)

    def observe(self, value: float) -> None:
        self._calls.call("metric", self._id, "observe", value)

    def value(self) -> float:
        return float(self._calls.call("metric", self._id, "value", None))


class RemoteFamily:
    """A server family; the server drops this instance's share of it when the instance unloads."""

    def __init__(self, calls: ServerCalls, family_id: int) -> None:
        self._calls = calls
        self._id = family_id

    def metric(self, labels: Mapping[str, str] | None, buckets: Sequence[float] | None) -> RemoteMetric:
        labels_sent = None if labels is None else dict(labels)
        buckets_sent = None if buckets is None else list(buckets)
        return RemoteMetric(self._calls, self._calls.call("series", self._id, labels_sent, buckets_sent))

    def remove(self, metric: RemoteMetric) -> None:
        """Nothing to do here: the server holds the instance's share until the instance unloads."""

    def close(self) -> None:
        """Nothing to do here: the server holds the instance's share until the instance unloads."""


class RemoteMetrics:
    """The server's custom metric families (see :class:`naiad.metrics.custom.CustomMetrics`)."""

    def __init__(self, calls: ServerCalls) -> None:
        self._calls = calls

    def family(self, name: str, description: str, kind: MetricKind) -> RemoteFamily:
        return RemoteFamily(self._calls, self._calls.call("family", name, description, kind))


class RemoteServer:
    """What ``pb_utils`` asks of a :class:`~naiad.backend.ServerHandle`, asked of the server over the socket."""

    def __init__(self, calls: ServerCalls, submit: Callable[..., Any]) -> None:
        self._calls = calls
        self.metrics = RemoteMetrics(calls)
        self.submit = submit  # BLS: see naiad_python.isolation.bls_client

    def model_ready(self, name: str, version: str | int = "") -> bool:
        return bool(self._calls.call("model_ready", name, str(version)))

    def load_model(
        self, name: str, config: ModelConfig | str | None = None, files: Mapping[str, bytes] | None = None
    ) -> None:
        sent = config.SerializeToString() if isinstance(config, ModelConfig) else config  # JSON text as it is
        self._calls.call("load_model", name, sent, files)

    def unload_model(self, name: str, *, unload_dependents: bool = False) -> None:
        self._calls.call("unload_model", name, unload_dependents)
