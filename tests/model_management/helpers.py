"""Models and waits shared by the model-management tests: built-in identity models (no framework)
and python models whose ``initialize`` takes its time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

POLL_SECS = 0.5
POLL_FLAG = f"--repository-poll-secs={POLL_SECS}"
UNKNOWN_MODEL = "Request for unknown model"


def identity_config(delay_ms: int = 0, max_batch_size: int = 0, extra: str = "") -> str:
    """An ``identity``-backend model: OUTPUT0 is INPUT0 (FP32), after ``delay_ms``; ``extra`` ends the config."""
    return f"""
        backend: "identity"
        max_batch_size: {max_batch_size}
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        parameters {{ key: "execute_delay_ms" value: {{ string_value: "{delay_ms}" }} }}
        {extra}
    """


def ensemble_config(step: str) -> str:
    """An ensemble of one step, the identity model ``step``: OUTPUT0 is INPUT0."""
    return f"""
        platform: "ensemble"
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
        ensemble_scheduling {{ step [ {{
          model_name: "{step}" model_version: -1
          input_map {{ key: "INPUT0" value: "INPUT0" }} output_map {{ key: "OUTPUT0" value: "OUTPUT0" }}
        }} ] }}
    """


def identity_files(*versions: int) -> dict[str, str]:
    """Empty version folders (the identity backend needs no model file)."""
    return {f"{version}/.keep": "" for version in versions}


def infer(client: Any, model: str, values: list[float], version: str = "") -> np.ndarray:
    """Send ``values`` through an identity model over HTTP or gRPC; the returned OUTPUT0."""
    module: Any = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    tensor = module.InferInput("INPUT0", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
    return client.infer(model, [tensor], model_version=version).as_numpy("OUTPUT0")


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.05)


def index(client: httpclient.InferenceServerClient) -> dict[tuple[str, str], str]:
    """(model, version) -> state of every versioned entry of the repository index."""
    return {(e["name"], e["version"]): e["state"] for e in client.get_model_repository_index() if "version" in e}
