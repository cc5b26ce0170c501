"""Property-based fuzzing of the HTTP request decoders: the infer body and its decompression.

Whatever a client sends, the decoder returns a request or raises :class:`NaiadError` (Triton's error
format with a status), never another exception, which would be a 500 from Python. A bounded,
derandomized number of examples runs in CI.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import zlib
from typing import Any

from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from naiad.errors import NaiadError
from naiad.http import codec
from naiad.http.body import decompress
from naiad.models import ModelSignature
from naiad.protocol.model_config_pb2 import ModelConfig

FUZZ = settings(
    max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
LIMIT = 1 << 16


def _signature(max_batch_size: int) -> ModelSignature:
    config = text_format.Parse(
        f"""
        max_batch_size: {max_batch_size}
        input [ {{ name: "A" data_type: TYPE_FP32 dims: [ -1 ] }},
                {{ name: "B" data_type: TYPE_STRING dims: [ 2 ] optional: true }},
                {{ name: "C" data_type: TYPE_UINT8 dims: [ -1, -1 ] optional: true }} ]
        output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        """,
        ModelConfig(),
    )
    return ModelSignature.from_config(config)


SIGNATURES = [_signature(0), _signature(4)]

_INTS = st.one_of(
    st.integers(-3, 8),
    st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, 2**64 + 1, -(2**63), 10**30]),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, st.floats(), st.text(max_size=8))
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
)
_NAMES = st.one_of(st.sampled_from(["A", "B", "C", "Z"]), _JSON)
_DATATYPES = st.one_of(
    st.sampled_from(["FP32", "BYTES", "UINT8", "FP16", "BF16", "BOOL", "INT64", "FP64", "NOPE"]), _JSON
)
_SHAPES = st.one_of(
    st.lists(st.integers(0, 3), max_size=3),
    st.lists(_INTS, max_size=4),
    st.lists(st.just(1), min_size=60, max_size=70),
    _JSON,
)
_DATA = st.one_of(
    _JSON,
    st.lists(st.floats(width=32), max_size=8),
    st.lists(st.lists(st.integers(0, 255), max_size=4), max_size=4),
    st.lists(st.text(max_size=4), max_size=4),
)
_PARAMETER_VALUES = st.one_of(_SCALARS, _JSON)


def _fitting_data(shape: Any, datatype: Any) -> st.SearchStrategy[Any]:
    """Values of the datatype, as many as a small shape asks for: requests that get past the parse checks."""
    if not isinstance(shape, list) or not all(isinstance(dim, int) and dim >= 0 for dim in shape):
        return _DATA
    count = 1
    for dim in shape:
        count *= dim
    if count > 16:
        return _DATA
    values = {
        "BYTES": st.text(max_size=3),
        "BOOL": st.booleans(),
        "UINT8": st.integers(-(2**70), 2**70),
        "INT64": st.integers(-(2**70), 2**70),
    }.get(datatype if isinstance(datatype, str) else "", st.floats(width=32))
    return st.one_of(st.lists(values, min_size=count, max_size=count), values if count == 1 else _DATA)


@st.composite
def _inputs(draw: st.DrawFn) -> dict[str, Any]:
    shape, datatype = draw(_SHAPES), draw(_DATATYPES)
    entry: dict[str, Any] = {"name": draw(_NAMES), "datatype": datatype, "shape": shape}
    source = draw(st.sampled_from(["data", "data", "data", "binary", "both", "none", "shm"]))
    if source in ("data", "both"):
        entry["data"] = draw(st.one_of(_fitting_data(shape, datatype), _fitting_data(shape, datatype), _DATA))
    if source in ("binary", "both"):
        entry["parameters"] = {"binary_data_size": draw(_INTS)}
    if source == "shm":
        entry["parameters"] = {"shared_memory_region": "r"}
    if draw(st.integers(0, 5)) == 0:
        return {key: value for key, value in entry.items() if draw(st.booleans())}
    return entry


@st.composite
def _documents(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_JSON)
    document: dict[str, Any] = {"inputs": draw(st.one_of(st.lists(_inputs(), max_size=4), _JSON))}
    if draw(st.booleans()):
        document["id"] = draw(st.one_of(st.text(max_size=5), _JSON))
    if draw(st.booleans()):
        document["parameters"] = draw(st.dictionaries(st.text(max_size=6), _PARAMETER_VALUES, max_size=3))
    if draw(st.booleans()):
        outputs = st.lists(
            st.fixed_dictionaries({"name": _NAMES}, optional={"parameters": st.dictionaries(st.text(), _JSON)}),
            max_size=3,
        )
        document["outputs"] = draw(st.one_of(outputs, _JSON))
    return document


@FUZZ
@given(
    document=_documents(),
    tail=st.binary(max_size=64),
    header=st.sampled_from(["none", "exact", "zero", "short", "long"]),
    batching=st.booleans(),
)
def test_any_infer_body_decodes_or_raises_a_naiad_error(
    document: Any, tail: bytes, header: str, batching: bool
) -> None:
    head = json.dumps(document).encode()
    body = bytearray(head + tail) if header != "none" else bytearray(head)
    header_length = {"none": None, "exact": len(head), "zero": 0, "short": len(head) // 2, "long": len(body) + 1}
    try:
        decoded = codec.decode_request(body, header_length[header], "m", SIGNATURES[batching], LIMIT)
    except NaiadError:
        return
    assert all(tensor.name in SIGNATURES[batching].inputs for tensor in decoded.inputs)


@FUZZ
@given(body=st.binary(max_size=256), header=st.one_of(st.none(), st.integers(0, 300)))
def test_any_bytes_decode_or_raise_a_naiad_error(body: bytes, header: int | None) -> None:
    with contextlib.suppress(NaiadError):
        codec.decode_request(bytearray(body), header, "m", SIGNATURES[0], LIMIT)


@FUZZ
@given(
    payload=st.binary(max_size=512),
    encoding=st.sampled_from(["gzip", "deflate", "identity", "br", "x"]),
    damage=st.sampled_from(["none", "truncate", "flip", "raw"]),
    repeat=st.integers(1, 300),
)
def test_any_compressed_body_inflates_within_the_limit_or_raises_a_naiad_error(
    payload: bytes, encoding: str, damage: str, repeat: int
) -> None:
    data = payload * repeat
    packed = gzip.compress(data) if encoding == "gzip" else zlib.compress(data)
    if damage == "truncate":
        packed = packed[: len(packed) // 2]
    elif damage == "flip" and packed:
        packed = packed[:-1] + bytes([packed[-1] ^ 0xFF])
    elif damage == "raw":
        packed = payload
    try:
        out = asyncio.run(decompress(bytearray(packed), encoding, LIMIT))
    except NaiadError:
        return
    assert len(out) <= LIMIT
    if encoding in ("gzip", "deflate") and damage == "none":
        assert out == data
