"""Write a tiny OpenVINO example model into a model repository.

    python plugins/openvino/examples/make_example.py [REPOSITORY]

creates ``<REPOSITORY>/openvino_add_mul/config.pbtxt`` and ``1/model.xml`` + ``1/model.bin``
(default REPOSITORY: ``<repo root>/examples/model_repository``). The model takes two FP32
tensors of shape [-1, 4] and returns their sum (OUTPUT0) and the first one scaled by
[1, 2, 3, 4] (OUTPUT1). It is built with ``onnx.helper`` and converted to OpenVINO IR with
``openvino.convert_model`` + ``openvino.save_model``; nothing binary is committed. A model folder
that is already there is kept, edits and all.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

MODEL_NAME = "openvino_add_mul"

CONFIG = """\
backend: "openvino"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "PERFORMANCE_HINT" value: { string_value: "LATENCY" } }
parameters { key: "NUM_STREAMS" value: { string_value: "1" } }
"""


def build_onnx(path: Path) -> None:
    """The ONNX graph: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 * [1, 2, 3, 4]."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 4]) for name in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 4]) for name in ("OUTPUT0", "OUTPUT1")]
    scale = helper.make_tensor("SCALE", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Mul", ["INPUT0", "SCALE"], ["OUTPUT1"]),
    ]
    graph = helper.make_graph(nodes, MODEL_NAME, inputs, outputs, [scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def make_example(repository: Path) -> Path:
    """Create the example model in ``repository``; returns its model directory."""
    import openvino as ov

    model_dir = repository / MODEL_NAME
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        onnx_path = Path(scratch) / "model.onnx"
        build_onnx(onnx_path)
        ov.save_model(ov.convert_model(str(onnx_path)), str(version_dir / "model.xml"), compress_to_fp16=False)
    (model_dir / "config.pbtxt").write_text(CONFIG)
    return model_dir


def main() -> None:
    default = Path(__file__).resolve().parents[3] / "examples" / "model_repository"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("repository", nargs="?", type=Path, default=default, help=f"default: {default}")
    args = parser.parse_args()
    if (args.repository / MODEL_NAME).exists():
        print(f"kept {args.repository / MODEL_NAME}: it is there already (delete it to generate it afresh)")
        return
    model_dir = make_example(args.repository)
    print(f"wrote {model_dir}/config.pbtxt and {model_dir}/1/model.xml + model.bin")


if __name__ == "__main__":
    main()
