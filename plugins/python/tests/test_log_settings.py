"""The logging extension reaches what a python model logs, in the server process and in a worker.

As in Triton, ``pb_utils.Logger.log_verbose`` lines appear once the verbose level is raised at run
time (``/v2/logging``) and stop when it is lowered again; ``log_info: false`` silences
``log_info``. A worker started before the change follows it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess, start_server

from .models import CHATTY, isolated, write_model


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repository: Path = tmp_path_factory.mktemp("models")
    for mode in ("thread", "process"):
        write_model(repository, f"chatty_{mode}", isolated(CHATTY, mode))
    running = start_server([repository])
    yield running
    running.stop()


def _logged(server: ServerProcess, model: str, mark: int) -> set[str]:
    """Run ``model`` with ``mark``; which of its lines for that mark reached the server log."""
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("MARK", [1], "INT32")
    tensor.set_data_from_numpy(np.array([mark], np.int32))
    assert client.infer(model, [tensor]).as_numpy("OUT")[0] == mark
    client.close()
    deadline = time.monotonic() + 10
    while f"warning line {mark}" not in server.logs() and time.monotonic() < deadline:
        time.sleep(0.05)  # a worker's lines arrive on their own socket: the warning comes last
    logs = server.logs()  # marks have three digits: no line of one mark names another
    return {kind for kind in ("verbose", "info", "warning") if f"{kind} line {mark}" in logs}


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_verbose_and_info_lines_follow_the_settings_changed_at_run_time(server: ServerProcess, mode: str) -> None:
    model = f"chatty_{mode}"
    marks = iter(range(100 if mode == "thread" else 200, 300))
    settings = httpclient.InferenceServerClient(server.http_url)
    try:
        assert _logged(server, model, next(marks)) == {"info", "warning"}
        settings.update_log_settings({"log_verbose_level": 1})
        assert _logged(server, model, next(marks)) == {"verbose", "info", "warning"}
        settings.update_log_settings({"log_verbose_level": 0, "log_info": False})
        assert _logged(server, model, next(marks)) == {"warning"}
    finally:
        settings.update_log_settings({"log_verbose_level": 0, "log_info": True})
        settings.close()
