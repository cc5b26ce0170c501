"""The race a reload or unload opens: a request that found a version just before it was unpublished
and reaches it after its scheduler stopped is served by what serves the model now, or, when the
model is gone, gets Triton's not-found answer, never an internal error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from naiad.errors import ErrorCode, NaiadError
from naiad.sinks import BlockingSink
from naiad.tensor import Tensor
from naiad.testing import ModelRepositoryBuilder
from naiad.testing.threaded import ThreadedServer, serve_in_thread

from .helpers import identity_config, identity_files


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadedServer]:
    repository = ModelRepositoryBuilder(tmp_path / "models")
    repository.add_model("model", identity_config(), identity_files(1))
    with serve_in_thread([repository.root], model_control_mode="explicit", load_models=("model",)) as running:
        yield running


def _submit_to_found_version(server: ThreadedServer, change: str) -> BlockingSink:
    """Resolve the model, let ``change`` (reload or unload) retire that version, then submit to it."""
    service = server.server.service
    found = service.resolve("model")
    if change == "reload":
        service.lifecycle.load_model("model")
    else:
        service.lifecycle.unload_model("model")
    sink = BlockingSink()
    service.submit(found, [Tensor("INPUT0", "FP32", np.array([2.0], np.float32))], sink)
    return sink


def test_a_request_for_a_reloaded_version_is_served_by_the_new_one(server: ThreadedServer) -> None:
    response = _submit_to_found_version(server, "reload").response(5, model="model")
    assert response.outputs[0].numpy().tolist() == [2.0]


def test_a_request_for_an_unloaded_model_gets_the_not_found_answer(server: ThreadedServer) -> None:
    with pytest.raises(NaiadError) as caught:
        _submit_to_found_version(server, "unload")
    assert caught.value.code is ErrorCode.NOT_FOUND
    assert caught.value.message == "Request for unknown model: 'model' has no available versions"
