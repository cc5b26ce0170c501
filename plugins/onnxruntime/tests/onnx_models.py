"""Tiny real ONNX models built with ``onnx.helper`` (nothing binary is committed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what every onnxruntime >= 1.17 reads

Dim = int | str | None


def _value(name: str, element_type: int, shape: Sequence[Dim] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element_type, None if shape is None else list(shape))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, int, Sequence[Dim] | None]],
    outputs: Sequence[tuple[str, int, Sequence[Dim] | None]],
    initializers: Sequence[onnx.TensorProto] = (),
    name: str = "graph",
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        name,
        [_value(*spec) for spec in inputs],
        [_value(*spec) for spec in outputs],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="naiad-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def add_sub(
    element_type: int = TensorProto.FLOAT,
    shape: Sequence[Dim] = ("batch", 4),
    names: tuple[str, str, str, str] = ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1"),
) -> onnx.ModelProto:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (Triton's classic example)."""
    a, b, total, difference = names
    return make_model(
        [helper.make_node("Add", [a, b], [total]), helper.make_node("Sub", [a, b], [difference])],
        [(a, element_type, shape), (b, element_type, shape)],
        [(total, element_type, shape), (difference, element_type, shape)],
    )


def matmul(weights: np.ndarray) -> onnx.ModelProto:
    """Y = X @ W + 1 with W an initializer: X [batch, k] -> Y [batch, n]."""
    k, n = weights.shape
    return make_model(
        [
            helper.make_node("MatMul", ["X", "W"], ["XW"]),
            helper.make_node("Add", ["XW", "ONE"], ["Y"]),
        ],
        [("X", TensorProto.FLOAT, ["batch", k])],
        [("Y", TensorProto.FLOAT, ["batch", n])],
        [
            numpy_helper.from_array(weights.astype(np.float32), "W"),
            numpy_helper.from_array(np.ones(n, dtype=np.float32), "ONE"),
        ],
    )


def int64_scale() -> onnx.ModelProto:
    """Y = X * 3 + OFFSET on INT64, fixed 2-D shape without a batch dimension."""
    return make_model(
        [
            helper.make_node("Mul", ["X", "THREE"], ["X3"]),
            helper.make_node("Add", ["X3", "OFFSET"], ["Y"]),
        ],
        [("X", TensorProto.INT64, [2, 3]), ("OFFSET", TensorProto.INT64, [2, 3])],
        [("Y", TensorProto.INT64, [2, 3])],
        [numpy_helper.from_array(np.array(3, dtype=np.int64), "THREE")],
    )


def bool_logic() -> onnx.ModelProto:
    """AND = A and B, NOT_A = not A on BOOL tensors with a batch dimension."""
    return make_model(
        [helper.make_node("And", ["A", "B"], ["AND"]), helper.make_node("Not", ["A"], ["NOT_A"])],
        [("A", TensorProto.BOOL, ["n", 3]), ("B", TensorProto.BOOL, ["n", 3])],
        [("AND", TensorProto.BOOL, ["n", 3]), ("NOT_A", TensorProto.BOOL, ["n", 3])],
    )


def string_identity() -> onnx.ModelProto:
    """TEXT_OUT = TEXT (BYTES / TYPE_STRING) with a batch dimension."""
    return make_model(
        [helper.make_node("Identity", ["TEXT"], ["TEXT_OUT"])],
        [("TEXT", TensorProto.STRING, ["batch", 2])],
        [("TEXT_OUT", TensorProto.STRING, ["batch", 2])],
    )


def scalar_sum() -> onnx.ModelProto:
    """TOTAL (a scalar) = sum of X [3]: cannot batch, the scalar output becomes dims [1]."""
    return make_model(
        [helper.make_node("ReduceSum", ["X"], ["TOTAL"], keepdims=0)],
        [("X", TensorProto.FLOAT, [3])],
        [("TOTAL", TensorProto.FLOAT, [])],
    )


def vector_negate() -> onnx.ModelProto:
    """Y = -X on a 1-D tensor whose only dimension is the batch: dims [1] with an empty reshape."""
    return make_model(
        [helper.make_node("Neg", ["X"], ["Y"])],
        [("X", TensorProto.FLOAT, ["batch"])],
        [("Y", TensorProto.FLOAT, ["batch"])],
    )


def accumulator() -> onnx.ModelProto:
    """OUT = IN + STATE_IN and STATE_OUT = OUT: a running sum when STATE is a sequence's implicit state."""
    return make_model(
        [helper.make_node("Add", ["IN", "STATE_IN"], ["OUT"]), helper.make_node("Identity", ["OUT"], ["STATE_OUT"])],
        [("IN", TensorProto.FLOAT, ["batch", 1]), ("STATE_IN", TensorProto.FLOAT, ["batch", 1])],
        [("OUT", TensorProto.FLOAT, ["batch", 1]), ("STATE_OUT", TensorProto.FLOAT, ["batch", 1])],
    )


def ragged_double() -> onnx.ModelProto:
    """OUT = 2 * INPUT over a flat ragged batch, and ENDS = INDEX as one row per request (INDEX: the batch
    input with each request's accumulated element count)."""
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    two = numpy_helper.from_array(np.array(2, dtype=np.float32), "two")
    return make_model(
        [
            helper.make_node("Mul", ["INPUT", "two"], ["OUT"]),
            helper.make_node("Unsqueeze", ["INDEX", "axes"], ["ENDS"]),
        ],
        [("INPUT", TensorProto.FLOAT, ["elements"]), ("INDEX", TensorProto.INT32, ["requests"])],
        [("OUT", TensorProto.FLOAT, ["elements"]), ("ENDS", TensorProto.INT32, ["requests", 1])],
        [axes, two],
    )


def sequence_output() -> onnx.ModelProto:
    """An output that is a sequence of tensors, which Triton cannot serve."""
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["X"], ["SEQ"])],
        "seq",
        [_value("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_sequence_value_info("SEQ", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def save_with_external_data(model: onnx.ModelProto, folder: Path, data_file: str = "weights.bin") -> Path:
    """Write ``folder/model.onnx`` with every initializer in ``folder/<data_file>``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data_file, size_threshold=0
    )
    return path
