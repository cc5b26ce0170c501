"""The response cache: a request a model answered before is answered again without running the model.

Triton's ``local`` cache. The server holds one :class:`ResponseCache` (``--cache-config
local,size=BYTES``), shared by every model version whose config says ``response_cache { enable:
true }``; each such version gets a :class:`ModelCache`, which the service asks before queueing a
request (:meth:`ModelCache.answer`) and whose pipeline stage stores the response of a request it
did not find (:class:`ModelCache` is that stage too).

An entry's key is a digest of the model's name and version, the request's inputs (names, datatypes,
shapes and data) and its parameters; its value is the response's outputs and parameters, copied to
host memory. A request is answered from an entry that holds every output it asks for (and gets just
those); otherwise the model runs and the entry gains the outputs it produced. Errors are never
stored. The cache evicts the least recently used entries to make room, and keeps no entry larger
than itself.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from naiad import datatypes
from naiad.inference import (
    Deliver,
    InferenceRequest,
    InferenceResponse,
    ParameterValue,
    ResponseEvent,
    ResponseSender,
)
from naiad.tensor import Tensor

if TYPE_CHECKING:
    from naiad.statistics import ModelStatistics

logger = logging.getLogger(__name__)

LOCAL_CACHE = "local"

_loads = itertools.count(1)  # numbers each model version's load, for its keys

_ENTRY_OVERHEAD = 64  # bytes an entry costs beyond its outputs' data (key, names, bookkeeping)


@dataclass(frozen=True, slots=True)
class CacheSettings:
    """``--cache-config``: which cache the server keeps and its size in bytes."""

    name: str = LOCAL_CACHE
    size: int = 0


def parse_cache_config(entries: list[str], byte_size: int | None = None) -> CacheSettings | None:
    """The cache ``--cache-config`` entries (``local,size=1048576``) ask for; None without any.

    ``byte_size`` is the deprecated ``--response-cache-byte-size``, which Triton reads as
    ``local,size=N``; with ``--cache-config`` too it is refused, as Triton refuses it. Raises
    ValueError naming the entry that naiad cannot use.
    """
    if entries and byte_size is not None:  # Triton's words
        raise ValueError(
            "Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or "
            "the other."
        )
    if not entries:
        if byte_size is None:
            return None
        entries = [f"{LOCAL_CACHE},size={byte_size}"]
    settings: dict[str, str] = {}
    name = ""
    for entry in entries:
        cache, _, setting = entry.partition(",")
        key, equals, value = setting.partition("=")
        if not cache or not equals or not key:
            raise ValueError(f"--cache-config '{entry}' is not <cache>,<key>=<value>, e.g. local,size=1048576")
        if name and cache != name:
            raise ValueError(
                f"--cache-config: found multiple cache configurations ('{name}' and '{cache}'), but only a single "
                "cache is currently supported"
            )
        name = cache
        settings[key] = value
    if name != LOCAL_CACHE:
        raise ValueError(f"--cache-config: naiad has no cache named '{name}'; the one it has is 'local'")
    unknown = sorted(set(settings) - {"size"})
    if unknown:
        raise ValueError(f"--cache-config local: unknown setting '{unknown[0]}'; the local cache takes size=BYTES")
    text = settings.get("size", "")
    if not text.isdigit() or int(text) == 0:
        raise ValueError(f"--cache-config local,size={text}: the size must be a whole number of bytes > 0")
    return CacheSettings(name, int(text))


@dataclass(frozen=True, slots=True)
class CachedResponse:
    """What a hit answers with: host copies of a response's outputs, and its parameters."""

    outputs: tuple[Tensor, ...]
    parameters: tuple[tuple[str, ParameterValue], ...]
    size: int
    names: frozenset[str]

    @classmethod
    def of(cls, response: InferenceResponse) -> CachedResponse:
        outputs = tuple(Tensor(tensor.name, tensor.datatype, np.array(tensor.numpy())) for tensor in response.outputs)
        size = _ENTRY_OVERHEAD + sum(_byte_size(tensor) + len(tensor.name) for tensor in outputs)
        names = frozenset(tensor.name for tensor in outputs)
        return cls(outputs, tuple(response.parameters.items()), size, names)

    def merged(self, older: CachedResponse) -> CachedResponse:
        """This entry plus the outputs of an older one for the same request that it lacks."""
        kept = tuple(tensor for tensor in older.outputs if tensor.name not in self.names)
        if not kept:
            return self
        size = self.size + sum(_byte_size(tensor) + len(tensor.name) for tensor in kept)
        return CachedResponse(self.outputs + kept, self.parameters, size, self.names | older.names)

    def holds(self, outputs: Collection[str]) -> bool:
        return self.names.issuperset(outputs)

    def response(self, outputs: Collection[str]) -> InferenceResponse:
        """A new response holding copies of the stored ``outputs`` (the caller may change them)."""
        return InferenceResponse(
            outputs=[
                Tensor(tensor.name, tensor.datatype, tensor.data.copy())
                for tensor in self.outputs
                if tensor.name in outputs
            ],
            parameters=dict(self.parameters),
        )


def _byte_size(tensor: Tensor) -> int:
    array = tensor.data
    if tensor.datatype == "BYTES":
        return len(datatypes.serialize_bytes(array))
    return int(array.nbytes)


class ResponseCache:
    """The server's cache: responses by key, least recently used first out, at most ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[bytes, CachedResponse] = OrderedDict()
        self._lock = threading.Lock()
        self.used = 0  # bytes the entries take
        self.lookups = self.hits = self.misses = self.evictions = 0
        self.lookup_ns = self.insertion_ns = 0  # time spent looking up (hits and misses) and storing

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: bytes, outputs: Collection[str], started_ns: int) -> CachedResponse | None:
        """The entry stored under ``key`` if it holds every one of ``outputs``, now the most recently
        used; ``started_ns``: when the lookup began (the key's digest is part of it)."""
        with self._lock:
            self.lookups += 1
            entry = self._entries.get(key)
            if entry is None or not entry.holds(outputs):
                entry = None
                self.misses += 1
            else:
                self._entries.move_to_end(key)
                self.hits += 1
            self.lookup_ns += time.monotonic_ns() - started_ns
        return entry

    def insert(self, key: bytes, response: InferenceResponse) -> None:
        """Store ``response``, evicting the least recently used entries to make room; one larger than
        the whole cache is not stored."""
        started = time.monotonic_ns()
        entry = CachedResponse.of(response)
        if entry.size > self.capacity:  # Triton's words, then what to do
            logger.error(
                "Failed to insert key [%s] into response cache: Requested byte_size: %d is greater than total cache "
                "size: %d (raise --cache-config local,size=BYTES to cache it)",
                key.hex()[:16],
                entry.size,
                self.capacity,
            )
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self.used -= previous.size
                entry = entry.merged(previous)
            while self.used + entry.size > self.capacity:
                _, evicted = self._entries.popitem(last=False)
                self.used -= evicted.size
                self.evictions += 1
            self._entries[key] = entry
            self.used += entry.size
            self.insertion_ns += time.monotonic_ns() - started


def request_key(request: InferenceRequest, load: int = 0) -> bytes:
    """The digest naming what a request asks of one load of a model version: the version, its inputs
    (name, datatype, shape, data) and its parameters."""
    digest = hashlib.blake2b(digest_size=32)
    digest.update(f"{request.model_name}\0{request.model_version}\0{load}\0".encode())
    for name in sorted(request.inputs):
        tensor = request.inputs[name]
        digest.update(f"{len(name)}:{name}\0{tensor.datatype}\0{tensor.shape}\0".encode())
        digest.update(_data_bytes(tensor))
    digest.update(repr(sorted(request.parameters.items())).encode())
    return digest.digest()


def _data_bytes(tensor: Tensor) -> bytes | memoryview:
    array = tensor.numpy()
    if tensor.datatype == "BYTES":
        return datatypes.serialize_bytes(array)
    return np.ascontiguousarray(array).view(np.uint8).data


class ModelCache:
    """One model version's use of the server's cache, and the pipeline stage that fills it.

    The stage sits last before the output options (classes, shared-memory destinations), so the
    cache keeps the outputs as the model produced them and a hit is shaped as each request asks.
    Its keys are its load's own: a reloaded version starts with no entries (the old ones age out).
    """

    def __init__(self, cache: ResponseCache, statistics: ModelStatistics | None) -> None:
        self._cache = cache
        self._statistics = statistics
        self._load = next(_loads)  # a reloaded version never answers with what its previous load said
        self._forward: Deliver | None = None  # the pipeline after this stage

    def bind(self, forward: Deliver) -> Deliver:
        self._forward = forward
        cache = self._cache
        statistics = self._statistics

        def deliver(sender: ResponseSender, event: ResponseEvent) -> None:
            pending = sender.cache_key
            if pending is not None:
                sender.cache_key = None  # the first response is the one stored
                key, lookup_ns = pending
                response = event.response
                started = time.monotonic_ns()
                if response is not None and response.error is None:
                    cache.insert(key, response)
                if statistics is not None:
                    statistics.cache_missed(lookup_ns + time.monotonic_ns() - started)
            forward(sender, event)

        return deliver

    def answer(self, request: InferenceRequest) -> bool:
        """Answer ``request`` from the cache if it holds its response (True); else mark it to be stored."""
        started = time.monotonic_ns()
        outputs = request.requested_outputs
        entry = self._cache.lookup(key := request_key(request, self._load), outputs, started)
        if entry is None:
            request.sender.cache_key = (key, time.monotonic_ns() - started)
            return False
        response = entry.response(outputs)
        if self._statistics is not None:  # counted before the client can see the response
            self._statistics.cache_hit(request, started, time.monotonic_ns())
        forward = self._forward
        assert forward is not None  # bound when the version's pipeline was built
        forward(request.sender, ResponseEvent(response, True))
        return True
