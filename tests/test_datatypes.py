"""Datatype spellings and the BYTES wire encoding."""

from __future__ import annotations

import numpy as np
import pytest

from naiad import datatypes
from naiad.errors import ErrorCode, NaiadError


def test_every_spelling_maps_both_ways() -> None:
    assert datatypes.BY_WIRE["BYTES"].config == "TYPE_STRING"
    assert datatypes.BY_CONFIG["TYPE_FP16"].numpy == np.float16
    assert datatypes.BY_NUMBER[13].wire == "BYTES"
    assert datatypes.from_numpy(np.int64).wire == "INT64"
    assert datatypes.from_numpy(np.bytes_).wire == "BYTES"
    assert [t.number for t in datatypes.BY_WIRE.values()] == list(range(1, 15))


def test_unknown_wire_name_is_invalid_arg() -> None:
    with pytest.raises(NaiadError) as caught:
        datatypes.from_wire("FP8")
    assert caught.value.code is ErrorCode.INVALID_ARG


def test_bytes_round_trip_keeps_empty_and_binary_elements() -> None:
    items = np.array([b"", b"\xff\x00", "é".encode(), b"abc"], dtype=np.object_)
    encoded = datatypes.serialize_bytes(items)
    assert encoded[:4] == b"\x00\x00\x00\x00"
    assert len(encoded) == 4 * 4 + 2 + 2 + 3
    assert list(datatypes.deserialize_bytes(encoded, 4)) == list(items)


def test_str_elements_are_utf8_encoded() -> None:
    assert datatypes.serialize_bytes(np.array(["hé"], dtype=np.object_)) == b"\x03\x00\x00\x00h\xc3\xa9"


@pytest.mark.parametrize(
    "element",
    [np.array([[b"ab"]], dtype=np.object_), np.array(["ab"]), np.array([b"ab"], dtype=np.bytes_), [np.str_("ab")]],
    ids=["object 1x1", "unicode", "numpy bytes", "list"],
)
def test_one_element_encodes_as_it_does_among_others(element: object) -> None:
    alone = datatypes.serialize_bytes(element)  # type: ignore[arg-type]
    among = datatypes.serialize_bytes(np.concatenate([np.asarray(element, dtype=np.object_).reshape(-1)] * 2))
    assert alone == b"\x02\x00\x00\x00ab"
    assert among == alone * 2


@pytest.mark.parametrize(
    ("buffer", "message"),
    [
        (b"\x05\x00", "truncated inside a 4-byte length prefix"),
        (b"\x05\x00\x00\x00ab", "declares 5 bytes but only 2 remain"),
    ],
)
def test_truncated_bytes_are_rejected(buffer: bytes, message: str) -> None:
    with pytest.raises(NaiadError, match=message):
        datatypes.deserialize_bytes(buffer)


def test_bytes_count_must_match() -> None:
    with pytest.raises(NaiadError, match="expected 2 BYTES elements, the data holds 1"):
        datatypes.deserialize_bytes(b"\x01\x00\x00\x00a", 2)
