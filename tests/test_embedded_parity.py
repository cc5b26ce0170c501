"""In-process requests behave as HTTP ones: the same statistics and the same error texts and codes.

One repository, served twice in this process: over HTTP (:func:`naiad.testing.serve_in_thread`) and
in-process (:class:`naiad.Server`). Each server gets the same requests; what they report must match.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad import ErrorCode, NaiadError, Server
from naiad.testing import ModelRepositoryBuilder, serve_in_thread

HTTP_STATUS = {ErrorCode.NOT_FOUND: "404", ErrorCode.INVALID_ARG: "400", ErrorCode.UNAVAILABLE: "503"}

COUNTED = """
backend: "identity"
max_batch_size: 8
dynamic_batching { }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

TWO_INPUTS = """
backend: "identity"
max_batch_size: 0
input [ { name: "A" data_type: TYPE_INT32 dims: [ 2 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "A_OUT" data_type: TYPE_INT32 dims: [ 2 ] }, { name: "B_OUT" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("parity") / "models")
    builder.add_model("counted", COUNTED, {"1/.keep": ""})
    builder.add_model("two_inputs", TWO_INPUTS, {"1/.keep": ""})
    return builder.root


@pytest.fixture(scope="module")
def in_process(repository: Path) -> Iterator[Server]:
    with Server(repository) as server:
        yield server


@pytest.fixture(scope="module")
def http(repository: Path) -> Iterator[httpclient.InferenceServerClient]:
    with serve_in_thread([repository]) as threaded:
        client = httpclient.InferenceServerClient(threaded.http_url)
        yield client
        client.close()


def _http_infer(client: httpclient.InferenceServerClient, model: str, arrays: dict[str, np.ndarray]) -> None:
    inputs = []
    for name, array in arrays.items():
        tensor = httpclient.InferInput(name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    client.infer(model, inputs)


def _without_times(value: Any) -> Any:
    """Statistics with every duration and timestamp zeroed: what two servers can agree on."""
    if isinstance(value, dict):
        return {key: 0 if key in ("ns", "last_inference") else _without_times(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    return value


REQUESTS = [np.ones((1, 4), np.float32), np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)]


def test_statistics_count_in_process_requests_as_http_ones(
    in_process: Server, http: httpclient.InferenceServerClient
) -> None:
    for batch in REQUESTS:
        in_process.infer("counted", {"INPUT0": batch})
        _http_infer(http, "counted", {"INPUT0": batch})
    for server_infer in (
        lambda: in_process.infer("counted", {"INPUT0": np.ones((1, 3), np.float32)}),
        lambda: _http_infer(http, "counted", {"INPUT0": np.ones((1, 3), np.float32)}),
    ):
        with pytest.raises((NaiadError, InferenceServerException)):
            server_infer()  # refused by validation: counted the same way (not at all) by both
    ours = _counted(lambda: in_process.model_statistics("counted"), 6)
    theirs = _counted(lambda: http.get_inference_statistics("counted"), 6)
    assert _without_times(ours) == _without_times(theirs)


def _counted(read: Callable[[], Any], inferences: int) -> Any:
    """The statistics once they count ``inferences``: an execution is recorded when it ends, which can
    be just after its client has the response."""
    deadline = time.monotonic() + 5
    while (statistics := read())["model_stats"][0]["inference_count"] != inferences:
        assert time.monotonic() < deadline, statistics
        time.sleep(0.01)
    return statistics


@pytest.mark.parametrize(
    ("model", "arrays"),
    [
        ("missing", {"INPUT0": np.ones((1, 4), np.float32)}),
        ("counted", {"INPUT0": np.ones((1, 5), np.float32)}),  # wrong shape
        ("counted", {"INPUT0": np.ones((9, 4), np.float32)}),  # batch larger than max_batch_size
        ("counted", {"INPUT0": np.ones((1, 4), np.int32)}),  # wrong datatype
        ("two_inputs", {"A": np.ones(2, np.int32)}),  # an input missing
        ("two_inputs", {"A": np.ones(2, np.int32), "B": np.ones(2, np.int32), "C": np.ones(2, np.int32)}),
    ],
)
def test_invalid_requests_fail_with_the_http_text(
    in_process: Server, http: httpclient.InferenceServerClient, model: str, arrays: dict[str, np.ndarray]
) -> None:
    with pytest.raises(NaiadError) as ours:
        in_process.infer(model, arrays)
    with pytest.raises(InferenceServerException) as theirs:
        _http_infer(http, model, arrays)
    assert ours.value.message == theirs.value.message()
    assert HTTP_STATUS[ours.value.code] == theirs.value.status()
