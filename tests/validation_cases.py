"""Requests with several mistakes, and the one Triton 2.51 named: it checks the requested outputs in
sorted order, then the inputs in the order its hash map walks them (shared by the HTTP and gRPC tests)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Mistakes(NamedTuple):
    model: str
    inputs: list[tuple[str, list[int], str]]  # name, shape, datatype (FP32, INT32 or BYTES)
    outputs: list[str]
    message: str


SEVERAL_MISTAKES = [
    Mistakes(
        "add_sub",
        [("INPUT0", [4], "INT32"), ("INPUT1", [4], "INT32")],
        [],
        "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' expects 'FP32'",
    ),
    Mistakes(
        "add_sub",
        [("INPUT0", [4], "INT32"), ("INPUT1", [5], "FP32")],
        [],
        "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'add_sub'. Expected [4], got [5]. ",
    ),
    Mistakes(
        "add_sub",
        [("INPUT0", [4], "INT32"), ("B", [4], "FP32")],
        ["NOPE2", "OUTPUT0", "NOPE1"],
        "unexpected inference output 'NOPE1' for model 'add_sub'",
    ),
    Mistakes(
        "add_sub_batch",
        [("INPUT0_X", [1, 4], "FP32"), ("INPUT1", [], "FP32")],
        [],
        "[request id: <id_unknown>] input 'INPUT1' has no shape but model requires batch dimension for 'add_sub_batch'",
    ),
]

# Batching models' inputs that lead with 0: Triton takes the batch size from the other inputs (one
# item where all lead with 0) and sizes the data for it. Those whose items hold no elements Triton
# never answers (or hands the model a shape not the request's): naiad refuses them.
EMPTY_BATCHES = [
    Mistakes(
        "add_sub_batch",
        [("INPUT0", [0, 4], "FP32"), ("INPUT1", [0, 4], "FP32")],
        [],
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub_batch'. "
        "Expected 16, got 0",
    ),
    Mistakes(
        "add_sub_batch",
        [("INPUT0", [1, 4], "FP32"), ("INPUT1", [0, 4], "FP32")],
        [],
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub_batch'. "
        "Expected 16, got 0",
    ),
    Mistakes(
        "add_sub_batch",
        [("INPUT0", [0, 4], "FP32"), ("INPUT1", [1, 4], "FP32")],
        [],
        "[request id: <id_unknown>] input 'INPUT0' batch size does not match other inputs for 'add_sub_batch'",
    ),
    Mistakes(
        "string_reverse",
        [("TEXT", [0, 2], "BYTES")],
        [],
        "[request id: <id_unknown>] expected 2 string elements for inference input 'TEXT' for model "
        "'string_reverse', got 0",
    ),
    Mistakes(
        "string_reverse",
        [("TEXT", [0, 0], "BYTES")],
        [],
        "[request id: <id_unknown>] input 'TEXT' for model 'string_reverse' has shape [0,0]: a batch of 0 items. "
        "A model with max_batch_size 8 takes 1 to 8 items per request, as many in every input; send at least "
        "one item.",
    ),
]


def length_prefixed(*items: bytes) -> bytes:
    return b"".join(len(item).to_bytes(4, "little") + item for item in items)


_STRINGS = "for inference input 'TEXT' for model 'string_reverse'"

# BYTES data that does not hold its shape's elements, for string_reverse (one batching BYTES input
# TEXT), and the words Triton 2.51 refuses it with: it walks the elements, so one too many is
# named at the first extra one, and a last element cut short only once the count is right.
BAD_STRINGS: list[tuple[list[int], bytes, str]] = [
    ([1, 2], length_prefixed(b"a"), f"[request id: <id_unknown>] expected 2 string elements {_STRINGS}, got 1"),
    ([1, 1], b"", f"[request id: <id_unknown>] expected 1 string elements {_STRINGS}, got 0"),
    (
        [1, 2],
        length_prefixed(b"a", b"b", b"c", b"d", b"e"),
        f"[request id: <id_unknown>] unexpected number of string elements 3 {_STRINGS}, expecting 2",
    ),
    (
        [1, 2],
        length_prefixed(b"a") + b"\x01",
        f"[request id: <id_unknown>] incomplete string length indicator {_STRINGS}, expecting 4 bytes but only 1 "
        "bytes available. Please make sure the string length indicator is in one buffer.",
    ),
    ([1, 2], b"\x05\x00\x00\x00ab", f"[request id: <id_unknown>] expected 2 string elements {_STRINGS}, got 1"),
    (
        [1, 2],
        length_prefixed(b"a") + b"\x09\x00\x00\x00xy",
        "incomplete string data for inference input 'TEXT', expecting string of length 9 but only 2 bytes available",
    ),
]


def client_inputs(client_module: Any, case: Mistakes) -> list[Any]:
    """The case's inputs as InferInputs of ``client_module`` (``tritonclient.http`` or ``tritonclient.grpc``)."""
    inputs = []
    for name, shape, datatype in case.inputs:
        tensor = client_module.InferInput(name, shape, datatype)
        if datatype == "BYTES":
            tensor.set_data_from_numpy(np.full(shape, b"x", dtype=np.object_))
        else:
            tensor.set_data_from_numpy(np.ones(shape, dtype=np.float32 if datatype == "FP32" else np.int32))
        inputs.append(tensor)
    return inputs
