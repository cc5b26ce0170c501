"""Tiny real models for the tests: ONNX graphs built with ``onnx.helper``, the OpenVINO IR
converted from them (``openvino.convert_model`` + ``openvino.save_model``), and the engine's
own in-process result to compare the server's answers with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import openvino as ov
from onnx import TensorProto, helper

Dim = int | str
SCALE = np.array([0.5, -1.5, 2.0, 3.25], dtype=np.float32)


def add_mul(path: Path, batch: Dim = "batch") -> Path:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 * SCALE; FP32 tensors of shape [batch, 4]."""
    inputs = [_value(name, TensorProto.FLOAT, [batch, 4]) for name in ("INPUT0", "INPUT1")]
    outputs = [_value(name, TensorProto.FLOAT, [batch, 4]) for name in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Mul", ["INPUT0", "SCALE"], ["OUTPUT1"]),
    ]
    scale = helper.make_tensor("SCALE", TensorProto.FLOAT, [4], SCALE.tolist())
    return _save(path, helper.make_graph(nodes, "add_mul", inputs, outputs, [scale]))


def varlen(path: Path) -> Path:
    """y = relu(x) + 1 over FP32 [batch, n]: a dynamic dimension besides the batch one."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "one"], ["y"])]
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph(
        nodes,
        "varlen",
        [_value("x", TensorProto.FLOAT, ["batch", "n"])],
        [_value("y", TensorProto.FLOAT, ["batch", "n"])],
        [one],
    )
    return _save(path, graph)


def int_affine(path: Path) -> Path:
    """y = x * 3 + 1 over INT64 [2, 3]: static shape, so no batching."""
    nodes = [helper.make_node("Mul", ["x", "three"], ["m"]), helper.make_node("Add", ["m", "one"], ["y"])]
    constants = [
        helper.make_tensor("three", TensorProto.INT64, [1], [3]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
    ]
    graph = helper.make_graph(
        nodes,
        "int_affine",
        [_value("x", TensorProto.INT64, [2, 3])],
        [_value("y", TensorProto.INT64, [2, 3])],
        constants,
    )
    return _save(path, graph)


def to_ir(onnx_path: Path, xml_path: Path) -> Path:
    """Convert an ONNX file to OpenVINO IR (``xml_path`` and the ``.bin`` next to it)."""
    xml_path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.convert_model(str(onnx_path)), str(xml_path), compress_to_fp16=False)
    return xml_path


def reference(model_path: Path, inputs: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """What OpenVINO itself computes for ``inputs`` when it runs the file in this process."""
    compiled = ov.Core().compile_model(str(model_path), "CPU")
    results = compiled.create_infer_request().infer(dict(inputs))
    return {port.get_any_name(): results[port] for port in compiled.outputs}


def _value(name: str, element: int, shape: Sequence[Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element, list(shape))


def _save(path: Path, graph: onnx.GraphProto) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
