"""Repositories of small python models and servers running them, shared by the core tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "model_repository"

IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
"""

RAISE_IN_INITIALIZE = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file is corrupt")

    def execute(self, requests):
        return []
"""

RAISE_IN_EXECUTE = """
class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("cannot handle this input")
"""


def identity_config(name: str, data_type: str, dims: str = "[ -1 ]", max_batch_size: int = 0) -> str:
    """A config for the IDENTITY model with one input and one output of ``data_type``."""
    return f"""
        name: "{name}"
        backend: "python"
        max_batch_size: {max_batch_size}
        input [ {{ name: "INPUT0" data_type: {data_type} dims: {dims} }} ]
        output [ {{ name: "OUTPUT0" data_type: {data_type} dims: {dims} }} ]
    """


def build_core_repository(root: Path) -> Path:
    """The examples plus identity models for every datatype the tests round-trip."""
    builder = ModelRepositoryBuilder(root)
    for example in ("add_sub", "string_reverse"):
        builder.add_model(
            example,
            (EXAMPLES / example / "config.pbtxt").read_text(),
            {"1/model.py": (EXAMPLES / example / "1" / "model.py").read_text()},
        )
    builder.add_python_model(
        "add_sub_batch",
        (EXAMPLES / "add_sub" / "1" / "model.py").read_text(),
        """
        backend: "python"
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
                 { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
    )
    for name, data_type in (
        ("identity_bytes", "TYPE_STRING"),
        ("identity_fp16", "TYPE_FP16"),
        ("identity_int64", "TYPE_INT64"),
        ("identity_bool", "TYPE_BOOL"),
        ("identity_uint8", "TYPE_UINT8"),
        ("identity_fp64", "TYPE_FP64"),
    ):
        builder.add_python_model(name, IDENTITY, identity_config(name, data_type))
    builder.add_python_model("raises_in_execute", RAISE_IN_EXECUTE, identity_config("raises_in_execute", "TYPE_FP32"))
    return root


@pytest.fixture(scope="session")
def core_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_core_repository(tmp_path_factory.mktemp("core") / "models")


@pytest.fixture(scope="session", params=["uvicorn", "hypercorn"])
def core_server(request: pytest.FixtureRequest, core_repository: Path) -> Iterator[ServerProcess]:
    """One server over the core repository per HTTP server implementation."""
    server = start_server([core_repository], f"--http-server={request.param}")
    yield server
    server.stop()
