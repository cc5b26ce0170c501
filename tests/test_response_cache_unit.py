"""The response cache's parts: its flags, its keys and its byte-bounded LRU."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from naiad.inference import InferenceRequest, InferenceResponse, RequestedOutput, ResponseSender
from naiad.response_cache import CacheSettings, ResponseCache, parse_cache_config, request_key
from naiad.tensor import Tensor


def request(
    inputs: dict[str, np.ndarray], parameters: dict[str, str | int] | None = None, version: int = 1
) -> InferenceRequest:
    return InferenceRequest(
        model_name="m",
        model_version=version,
        inputs={
            name: Tensor(name, "BYTES" if data.dtype == np.object_ else "FP32", data) for name, data in inputs.items()
        },
        requested_outputs={"OUT": RequestedOutput("OUT")},
        sender=ResponseSender(lambda event: None),
        parameters=dict(parameters or {}),
    )


def response(size: int, *names: str) -> InferenceResponse:
    return InferenceResponse(
        outputs=[Tensor(name, "UINT8", np.zeros(size, dtype=np.uint8)) for name in names or ("OUT",)]
    )


def test_cache_config_flags() -> None:
    assert parse_cache_config([]) is None
    assert parse_cache_config(["local,size=1048576"]) == CacheSettings("local", 1048576)
    assert parse_cache_config([], byte_size=4096) == CacheSettings("local", 4096)  # --response-cache-byte-size
    for entries, message in (
        (["redis,host=x"], "no cache named 'redis'"),
        (["local,size=10", "redis,size=10"], "found multiple cache configurations"),
        (["local,size=-5"], "whole number of bytes > 0"),
        (["local,size="], "whole number of bytes > 0"),
        (["local,size=10", "local,eviction=lru"], "unknown setting 'eviction'"),
        (["local"], "is not <cache>,<key>=<value>"),
        ([",size=10"], "is not <cache>,<key>=<value>"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_cache_config(entries)
    with pytest.raises(ValueError, match="whole number of bytes > 0"):
        parse_cache_config([], byte_size=0)
    with pytest.raises(ValueError, match=r"^Incompatible flags") as caught:  # Triton's words
        parse_cache_config(["local,size=10"], byte_size=4096)
    assert str(caught.value) == (
        "Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or the "
        "other."
    )


def test_keys_name_the_inputs_their_shapes_and_parameters() -> None:
    a, b = np.arange(4, dtype=np.float32), np.ones(2, dtype=np.float32)
    key = request_key(request({"A": a, "B": b}))
    assert request_key(request({"B": b, "A": a})) == key  # order does not matter
    assert request_key(request({"A": a.copy(), "B": b.copy()})) == key
    assert request_key(request({"A": a.reshape(2, 2), "B": b})) != key
    assert request_key(request({"A": a, "B": b + 1})) != key
    assert request_key(request({"A": a})) != key
    assert request_key(request({"A": a, "B": b}, {"p": 1})) != key
    assert request_key(request({"A": a, "B": b}, version=2)) != key
    assert request_key(request({"A": a, "B": b}), load=7) != key  # another load of the version
    # The input's name is part of the key, and BYTES elements keep their boundaries.
    assert request_key(request({"AB": a})) != request_key(request({"A": a}))
    text = np.array([b"ab", b"c"], dtype=np.object_)
    assert request_key(request({"T": text})) != request_key(request({"T": np.array([b"a", b"bc"], dtype=np.object_)}))


def test_the_least_recently_used_entries_make_room() -> None:
    cache = ResponseCache(capacity=1000)
    for key in (b"a", b"b", b"c"):
        cache.insert(key, response(200))
    assert len(cache) == 3
    assert cache.lookup(b"a", ["OUT"], 0) is not None  # now the most recently used
    cache.insert(b"d", response(300))
    assert cache.lookup(b"b", ["OUT"], 0) is None  # the oldest went first
    assert cache.lookup(b"a", ["OUT"], 0) is not None
    assert cache.evictions >= 1
    assert cache.used <= cache.capacity
    assert (cache.hits, cache.misses, cache.lookups) == (2, 1, 3)


def test_an_entry_larger_than_the_cache_is_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    cache = ResponseCache(capacity=1000)
    cache.insert(b"a", response(100))
    with caplog.at_level(logging.ERROR):
        cache.insert(b"big", response(5000))
    assert cache.lookup(b"big", ["OUT"], 0) is None
    assert cache.lookup(b"a", ["OUT"], 0) is not None  # nothing was evicted for it
    assert "Failed to insert key [" in caplog.text  # Triton's words
    assert "into response cache: Requested byte_size: " in caplog.text
    assert "is greater than total cache size: 1000" in caplog.text


def test_a_hit_needs_every_output_asked_for_and_gets_copies() -> None:
    cache = ResponseCache(capacity=10_000)
    cache.insert(b"k", response(4, "OUT"))
    assert cache.lookup(b"k", ["OUT", "EXTRA"], 0) is None
    cache.insert(b"k", response(4, "EXTRA"))  # the entry gains EXTRA and keeps OUT
    entry = cache.lookup(b"k", ["OUT", "EXTRA"], 0)
    assert entry is not None
    answer = entry.response(["EXTRA"])
    assert [tensor.name for tensor in answer.outputs] == ["EXTRA"]
    answer.outputs[0].data[:] = 7  # a caller changing its response leaves the entry alone
    assert not entry.response(["EXTRA"]).outputs[0].data.any()
