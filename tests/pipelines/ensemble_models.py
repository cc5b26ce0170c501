"""Small models the ensemble tests compose: python steps, an ONNX graph, and ensemble configs."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from naiad.testing import ModelRepositoryBuilder

TOKENIZE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()[0].decode()
            features = np.array([len(text), text.count("a"), ord(text[0]) if text else 0, 1], dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", features)]))
        return responses
"""

DESCRIBE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "SCORES").as_numpy()
            label = "total=%d" % int(scores.sum())
            label_tensor = pb_utils.Tensor("LABEL", np.array([label.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([label_tensor]))
        return responses
"""

SLEEP_AND_ADD = """
import json
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.add = float(parameters["add"]["string_value"])
        self.delay = float(parameters["delay_s"]["string_value"])

    def execute(self, requests):
        time.sleep(self.delay)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                raise pb_utils.TritonModelException("negative input to add")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x + self.add).astype(np.float32))]))
        return responses
"""

JOIN = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b)]))
        return responses
"""

COUNT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

TIMES_TEN = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 10)]
            )
            for r in requests
        ]
"""

ECHO_PARAMETERS = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            seen = json.dumps({
                "parameters": json.loads(request.parameters()),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "timeout": request.timeout(),
            })
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x),
                pb_utils.Tensor("PARAMETERS", np.array([seen.encode()], dtype=np.object_)),
            ]))
        return responses
"""


def scale_onnx() -> bytes:
    """``SCORES = FEATURES * 2 + 1`` over FP32 [4]."""
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["FEATURES", "two"], ["doubled"]),
            helper.make_node("Add", ["doubled", "one"], ["SCORES"]),
        ],
        "scale",
        [helper.make_tensor_value_info("FEATURES", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("SCORES", TensorProto.FLOAT, [4])],
        initializer=[
            helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


WITHOUT_EXTRA = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
            for r in requests
        ]
"""

OPTIONAL_SUM = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B")
            total = a + (b.as_numpy() if b is not None else np.full_like(a, 100))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("S", total.astype(np.float32))]))
        return responses
"""


SHAPE_SEEN = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            seen = np.array([x.shape], dtype=np.int64)  # one row: the batch of 1 this model is sent
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1), pb_utils.Tensor("SEEN", seen)]))
        return responses
"""


def tensor(name: str, data_type: str, dims: str) -> str:
    return f'{{ name: "{name}" data_type: {data_type} dims: {dims} }}'


def step(model: str, inputs: dict[str, str], outputs: dict[str, str], version: int = -1) -> str:
    """One ``ensemble_scheduling`` step: ``inputs`` maps model inputs to ensemble tensors, ``outputs`` the reverse."""
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: {version}{maps} }}'


def ensemble(inputs: list[str], outputs: list[str], steps: list[str], max_batch_size: int = 0) -> str:
    return (
        f'platform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {', '.join(inputs)} ]\noutput [ {', '.join(outputs)} ]\n"
        f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}\n"
    )


def python_config(inputs: list[str], outputs: list[str], extra: str = "") -> str:
    return (
        f'backend: "python"\nmax_batch_size: 0\ninput [ {", ".join(inputs)} ]\noutput [ {", ".join(outputs)} ]\n{extra}'
    )


def sleeper_config(add: float, delay_s: float) -> str:
    parameters = (
        f'parameters {{ key: "add" value: {{ string_value: "{add}" }} }}\n'
        f'parameters {{ key: "delay_s" value: {{ string_value: "{delay_s}" }} }}\n'
    )
    return python_config([tensor("X", "TYPE_FP32", "[ 4 ]")], [tensor("Y", "TYPE_FP32", "[ 4 ]")], parameters)


def documented_pipeline() -> str:
    """The ensemble config shown in docs/pipelines.md (the first code block of its Ensembles section)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "pipelines.md").read_text()
    section = page.split("## Ensembles", 1)[1]
    return section.split("```", 2)[1].strip()


def build_repository(root: Path) -> Path:
    """Every model the ensemble tests use, the broken ensembles included."""
    builder = ModelRepositoryBuilder(root)
    features = tensor("FEATURES", "TYPE_FP32", "[ 4 ]")
    builder.add_python_model("tokenize", TOKENIZE, python_config([tensor("TEXT", "TYPE_STRING", "[ 1 ]")], [features]))
    builder.add_model(
        "scale",
        f'backend: "onnxruntime"\nmax_batch_size: 0\ninput [ {features} ]\n'
        f"output [ {tensor('SCORES', 'TYPE_FP32', '[ 4 ]')} ]\n",
        {"1/model.onnx": scale_onnx()},
    )
    builder.add_python_model(
        "describe",
        DESCRIBE,
        python_config([tensor("SCORES", "TYPE_FP32", "[ 4 ]")], [tensor("LABEL", "TYPE_STRING", "[ 1 ]")]),
    )
    builder.add_model("pipeline", documented_pipeline(), {"1/.keep": ""})
    builder.add_python_model("slow_a", SLEEP_AND_ADD, sleeper_config(1, 0.2))
    builder.add_python_model("slow_b", SLEEP_AND_ADD, sleeper_config(100, 0.2))
    builder.add_python_model("add_one", SLEEP_AND_ADD, sleeper_config(1, 0))
    vec = "[ 4 ]"
    builder.add_python_model(
        "join",
        JOIN,
        python_config(
            [tensor("A", "TYPE_FP32", vec), tensor("B", "TYPE_FP32", vec)], [tensor("SUM", "TYPE_FP32", vec)]
        ),
    )
    builder.add_model(
        "parallel",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("SUM", "TYPE_FP32", vec)],
            [
                step("slow_a", {"X": "X"}, {"Y": "a"}),
                step("slow_b", {"X": "X"}, {"Y": "b"}),
                step("join", {"A": "a", "B": "b"}, {"SUM": "SUM"}),
            ],
        ),
        {"1/.keep": ""},
    )
    builder.add_model(
        "two_steps",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("Y", "TYPE_FP32", vec)],
            [step("add_one", {"X": "X"}, {"Y": "mid"}), step("add_one", {"X": "mid"}, {"Y": "Y"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_model(
        "nested",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("Z", "TYPE_FP32", vec)],
            [step("two_steps", {"X": "X"}, {"Y": "y"}), step("add_one", {"X": "y"}, {"Y": "Z"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_model(
        "slow_chain",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("Y", "TYPE_FP32", vec)],
            [step("slow_a", {"X": "X"}, {"Y": "a"}), step("slow_b", {"X": "a"}, {"Y": "Y"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_python_model(
        "count",
        COUNT,
        python_config(
            [tensor("N", "TYPE_INT32", "[ 1 ]")],
            [tensor("I", "TYPE_INT32", "[ 1 ]")],
            "model_transaction_policy { decoupled: true }",
        ),
    )
    builder.add_python_model(
        "times_ten",
        TIMES_TEN,
        python_config([tensor("IN", "TYPE_INT32", "[ 1 ]")], [tensor("OUT", "TYPE_INT32", "[ 1 ]")]),
    )
    builder.add_model(
        "streaming",
        ensemble(
            [tensor("N", "TYPE_INT32", "[ 1 ]")],
            [tensor("OUT", "TYPE_INT32", "[ 1 ]")],
            [step("count", {"N": "N"}, {"I": "i"}), step("times_ten", {"IN": "i"}, {"OUT": "OUT"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_python_model(
        "echo_parameters",
        ECHO_PARAMETERS,
        python_config(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("Y", "TYPE_FP32", vec), tensor("PARAMETERS", "TYPE_STRING", "[ 1 ]")],
        ),
    )
    builder.add_model(
        "with_parameters",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("Y", "TYPE_FP32", vec), tensor("PARAMETERS", "TYPE_STRING", "[ 1 ]")],
            [step("echo_parameters", {"X": "X"}, {"Y": "Y", "PARAMETERS": "PARAMETERS"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_model(  # outputs listed SUM2 then DIFF: Triton 2.51 answers DIFF first (its map's order)
        "fork",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("SUM2", "TYPE_FP32", vec), tensor("DIFF", "TYPE_FP32", vec)],
            [step("add_one", {"X": "X"}, {"Y": "SUM2"}), step("echo_parameters", {"X": "X"}, {"Y": "DIFF"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_python_model(  # declares EXTRA, never sends it
        "without_extra",
        WITHOUT_EXTRA,
        python_config(
            [tensor("X", "TYPE_FP32", vec)], [tensor("Y", "TYPE_FP32", vec), tensor("EXTRA", "TYPE_FP32", vec)]
        ),
    )
    builder.add_python_model(
        "optional_sum",
        OPTIONAL_SUM,
        python_config(
            [tensor("A", "TYPE_FP32", vec), '{ name: "B" data_type: TYPE_FP32 dims: [ 4 ] optional: true }'],
            [tensor("S", "TYPE_FP32", vec)],
        ),
    )
    builder.add_model(
        "partial",
        ensemble(
            [tensor("X", "TYPE_FP32", vec)],
            [tensor("S", "TYPE_FP32", vec), tensor("EXTRA", "TYPE_FP32", vec)],
            [
                step("without_extra", {"X": "X"}, {"Y": "y", "EXTRA": "EXTRA"}),
                step("optional_sum", {"A": "y", "B": "EXTRA"}, {"S": "S"}),
            ],
        ),
        {"1/.keep": ""},
    )
    builder.add_python_model(  # a batching step inside a non-batching ensemble, and the reverse
        "batching_add_one",
        SHAPE_SEEN,
        python_config([_X], [_Y, tensor("SEEN", "TYPE_INT64", "[ 2 ]")]).replace(
            "max_batch_size: 0", "max_batch_size: 8"
        ),
    )
    builder.add_model(
        "unbatched_over_batching",
        ensemble(
            [_X],
            [_Y, tensor("SEEN", "TYPE_INT64", "[ 2 ]")],
            [step("batching_add_one", {"X": "X"}, {"Y": "Y", "SEEN": "SEEN"})],
        ),
        {"1/.keep": ""},
    )
    builder.add_model(
        "batching_over_unbatched",
        ensemble([_X], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"})], max_batch_size=8),
        {"1/.keep": ""},
    )
    builder.add_model(  # asked only for requests that fail
        "failing_chain", ensemble([_X], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"})]), {"1/.keep": ""}
    )
    builder.add_python_model(
        "fails_to_load",
        'class TritonPythonModel:\n    def initialize(self, args):\n        raise RuntimeError("broken init")\n',
        python_config([_X], [_Y]),
    )
    builder.add_model(
        "broken_step_failed",
        ensemble([_X], [_Y], [step("fails_to_load", {"X": "X"}, {"Y": "Y"})]),
        {"1/.keep": ""},
    )
    for name, config in BROKEN.items():
        builder.add_model(name, config, {"1/.keep": ""})
    return builder.root


_X = tensor("X", "TYPE_FP32", "[ 4 ]")
_Y = tensor("Y", "TYPE_FP32", "[ 4 ]")

BROKEN = {
    "broken_unknown": ensemble([_X], [_Y], [step("no_such_model", {"X": "X"}, {"Y": "Y"})]),
    "broken_dtype": ensemble([tensor("X", "TYPE_INT32", "[ 4 ]")], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"})]),
    "broken_shape": ensemble([tensor("X", "TYPE_FP32", "[ 3 ]")], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"})]),
    "broken_twice": ensemble(
        [_X], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"}), step("slow_a", {"X": "X"}, {"Y": "Y"})]
    ),
    "broken_unwritten": ensemble(
        [_X], [_Y, tensor("Z", "TYPE_FP32", "[ 4 ]")], [step("add_one", {"X": "X"}, {"Y": "Y"})]
    ),
    "broken_never_produced": ensemble(
        [_X],
        [_Y],
        [step("join", {"A": "X", "B": "nowhere"}, {"SUM": "Y"})],
    ),
    "broken_unused_input": ensemble(
        [_X, tensor("EXTRA", "TYPE_FP32", "[ 4 ]")], [_Y], [step("add_one", {"X": "X"}, {"Y": "Y"})]
    ),
    "broken_unmapped_input": ensemble([_X], [_Y], [step("join", {"A": "X"}, {"SUM": "Y"})]),
    "broken_cycle_a": ensemble([_X], [_Y], [step("broken_cycle_b", {"X": "X"}, {"Y": "Y"})]),
    "broken_cycle_b": ensemble([_X], [_Y], [step("broken_cycle_a", {"X": "X"}, {"Y": "Y"})]),
}
"""Ensembles that must not load, each broken one way."""
