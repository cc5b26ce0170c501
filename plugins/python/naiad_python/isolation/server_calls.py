"""The server side of a worker's ``pb_utils`` calls: model control and custom metrics, run in the server.

Each ``call`` message names one of the operations below; nothing else runs. Model control blocks (a
load can take minutes), so it runs on a small pool; metric operations run at once, on the thread that
read the message. The families and series a worker uses are the instance's shares in
:data:`~naiad_python.pbutils.metrics.shares`, held across worker restarts and dropped when the instance
unloads, as a unit's are in the server process.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from naiad.backend import ErrorCode, Metric, MetricFamily, MetricKind, ModelConfig, NaiadError, ServerHandle
from naiad_python.isolation.channel import ChannelClosed, Message
from naiad_python.pbutils.errors import TritonModelException
from naiad_python.pbutils.metrics import shares

_log = logging.getLogger("naiad.python")

_BLOCKING = frozenset({"load_model", "unload_model"})
_METRIC_OPERATIONS = frozenset({"increment", "set", "observe", "value"})

Reply = Callable[[Message], None]


class ServerCalls:
    """Answers the calls of one instance's workers; ``close`` when the instance unloads."""

    def __init__(self, model_name: str, instance_name: str, server: ServerHandle | None) -> None:
        self.model_name = model_name  # names the owner of the metric shares in errors
        self._instance = instance_name
        self._server = server
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._families: dict[int, MetricFamily] = {}
        self._series: dict[int, Metric] = {}
        self._releases: list[Callable[[], None]] | None = []
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"naiad-python-calls-{instance_name}")

    @property
    def server(self) -> ServerHandle:
        """The server the instance runs in (NaiadError when it was loaded without one)."""
        if self._server is None:
            raise NaiadError(
                f"model '{self.model_name}' was loaded without a server; pb_utils server calls are unavailable",
                ErrorCode.UNAVAILABLE,
            )
        return self._server

    def handle(self, message: Message, reply: Reply) -> None:
        """Run the call in ``message`` and send its reply with ``reply``."""
        work = partial(self._run, message["name"], *message["args"])
        if message["name"] in _BLOCKING:
            self._pool.submit(self.answer, message, reply, work)
        else:
            self.answer(message, reply, work)

    def answer(self, message: Message, reply: Reply, work: Callable[[], Any]) -> None:
        """Reply to the call in ``message`` with what ``work`` returns, or its error."""
        answer: Message = {"op": "reply", "call": message["call"]}
        try:
            answer["value"] = work()
        except NaiadError as error:
            answer["error"] = (error.message, error.code.name)
        except TritonModelException as error:  # the metric shares say it in pb_utils' words already
            answer["error"] = (error.message(), ErrorCode.INVALID_ARG.name)
        except Exception as error:  # a bad argument from the model: its call fails, nothing else
            answer["error"] = (f"{type(error).__name__}: {error}", ErrorCode.INVALID_ARG.name)
        with contextlib.suppress(ChannelClosed):  # the worker is gone; so is its caller
            reply(answer)

    def _run(self, name: str, *args: Any) -> Any:
        server = self.server
        if name == "model_ready":
            model, version = args
            return server.model_ready(model, version)
        if name == "load_model":
            model, config, files = args
            server.load_model(model, ModelConfig.FromString(config) if isinstance(config, bytes) else config, files)
            return None
        if name == "unload_model":
            model, unload_dependents = args
            server.unload_model(model, unload_dependents=unload_dependents)
            return None
        if name == "family":
            family_name, description, kind = args
            family = shares.family(
                self, self._subscribe, lambda: server.metrics.family(family_name, description, MetricKind(kind))
            )
            return self._remember(self._families, family)
        if name == "series":
            family_id, labels, buckets = args
            family = self._families[family_id]
            return self._remember(
                self._series, shares.metric(self, self._subscribe, family, lambda: family.metric(labels, buckets))
            )
        if name == "metric":
            series_id, operation, value = args
            if operation not in _METRIC_OPERATIONS:
                raise ValueError(f"unknown metric operation {operation!r}")
            method = getattr(self._series[series_id], operation)
            return method() if operation == "value" else method(value)
        raise ValueError(f"unknown server call {name!r}")

    def _remember(self, table: dict[int, Any], value: Any) -> int:
        with self._lock:
            for known_id, known in table.items():
                if known is value:
                    return known_id
            new_id = next(self._ids)
            table[new_id] = value
            return new_id

    def _subscribe(self, release: Callable[[], None]) -> bool:
        with self._lock:
            if self._releases is None:
                return False
            self._releases.append(release)
            return True

    def close(self) -> None:
        """The instance unloads: drop its metric shares and stop answering."""
        with self._lock:
            releases, self._releases = self._releases or [], None
            self._families.clear()
            self._series.clear()
        for release in releases:
            release()
        self._pool.shutdown(wait=False, cancel_futures=True)
