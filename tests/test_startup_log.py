"""What a real server's startup log tells its reader: failed models and why, readiness, empty repositories."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from naiad.testing import ModelRepositoryBuilder, ServerProcess, start_server

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "model_repository"

SYNTAX_ERROR = """
class TritonPythonModel:
    def execute(self, requests)
        return []
"""

AUTO_COMPLETE_RAISES = """
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        raise ValueError("no tokenizer next to the weights")

    def execute(self, requests):
        return []
"""


def _repository_with_a_broken_model(root: Path, *, with_add_sub: bool) -> Path:
    builder = ModelRepositoryBuilder(root)
    builder.add_python_model("broken", SYNTAX_ERROR, config='backend: "python"')
    if with_add_sub:
        shutil.copytree(EXAMPLES / "add_sub", root / "add_sub")
    return root


def _status(server: ServerProcess, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=body)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _last_line(server: ServerProcess) -> str:
    """The line that ends startup."""
    return next(
        line for line in server.logs().splitlines() if re.search(r"naiad\.server\] naiad \S+ is (ready|serving)", line)
    )


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """add_sub, which loads; 'broken', whose model.py has a syntax error; 'completes_badly', whose
    auto_complete_config raises."""
    repository = _repository_with_a_broken_model(tmp_path_factory.mktemp("models"), with_add_sub=True)
    ModelRepositoryBuilder(repository).add_python_model("completes_badly", AUTO_COMPLETE_RAISES, 'backend: "python"')
    server = start_server([repository])
    yield server
    server.stop()


def test_a_model_py_that_does_not_import_logs_its_traceback_as_lines(broken_server: ServerProcess) -> None:
    lines = broken_server.logs().splitlines()
    failed = next(index for index, line in enumerate(lines) if "failed to import" in line)
    assert re.search(r" E naiad\.python\] failed to import \S+/broken/1/model\.py for auto-complete", lines[failed])
    raised = lines.index("SyntaxError: expected ':'")
    assert lines[failed + 1] == "Traceback (most recent call last):"
    assert "    def execute(self, requests)" in lines[failed:raised]
    assert not [line for line in lines[failed:raised] if "\\x0a" in line]


def test_a_reason_of_several_lines_spans_as_many_table_lines(broken_server: ServerProcess) -> None:
    lines = broken_server.logs().splitlines()
    row = next(index for index, line in enumerate(lines) if line.startswith("| completes_badly "))
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[row : row + 4]]
    assert cells[0][:4] == ["completes_badly", "1", "python", "UNAVAILABLE"]
    reasons = [reason for *_, reason in cells]
    assert reasons[:3] == ["Internal: ValueError: no tokenizer next to the weights", "", "At:"]
    assert re.fullmatch(r"/\S+/completes_badly/1/model\.py\(5\): auto_complete_config", reasons[3])
    assert all(cell == "" for line in cells[1:] for cell in line[:4])
    assert lines[row + 4].startswith("+---")


def test_an_auto_complete_config_that_raises_logs_its_traceback_as_lines(broken_server: ServerProcess) -> None:
    lines = broken_server.logs().splitlines()
    failed = next(index for index, line in enumerate(lines) if "auto_complete_config of model" in line)
    expected = (
        " E naiad.python] auto_complete_config of model 'completes_badly' failed [model 'completes_badly' version 1]"
    )
    assert lines[failed].endswith(expected)
    assert lines[failed + 1] == "Traceback (most recent call last):"
    raised = lines.index("ValueError: no tokenizer next to the weights")
    assert '    raise ValueError("no tokenizer next to the weights")' in lines[failed:raised]


def test_the_last_startup_line_names_the_unavailable_models_instead_of_claiming_readiness(
    broken_server: ServerProcess,
) -> None:
    last = _last_line(broken_server)
    assert "is ready" not in broken_server.logs()
    assert re.search(r" W naiad\.server\] naiad \S+ is serving but not ready: HTTP on 127\.0\.0\.1:\d+ ", last)
    assert "; 2 of 3 models are unavailable (broken, completes_badly), so /v2/health/ready answers 400 until" in last
    assert "(--strict-readiness true)" in last
    assert "POST /v2/repository/index" in last
    assert "restart naiad" in last
    assert "or run with --strict-readiness false" in last
    assert _status(broken_server, "/v2/health/ready")[0] == 400  # what the line says
    assert _status(broken_server, "/v2/models/add_sub/ready")[0] == 200  # the other model serves


def test_the_places_the_readme_names_for_a_failed_models_reason_show_it(broken_server: ServerProcess) -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "Later, `POST /v2/repository/index` lists every model with its state and reason" in readme
    reason = "Internal: SyntaxError: expected ':' (model.py, line 3)"  # Triton's reason
    status, body = _status(broken_server, "/v2/repository/index", b"{}")
    assert status == 200
    entry = next(entry for entry in json.loads(body) if entry["name"] == "broken")
    assert entry["state"] == "UNAVAILABLE"
    assert entry["reason"].startswith(reason)
    table_row = next(line for line in broken_server.logs().splitlines() if line.startswith("| broken "))
    assert "| UNAVAILABLE | " + reason in table_row
    # As in Triton, the model's own endpoints know nothing of a model that did not load (README says so).
    assert "`/v2/models/<name>` answers 404 for a model that did not load, as in Triton" in readme
    assert _status(broken_server, "/v2/models/broken")[0] == 404


def test_without_strict_readiness_the_server_is_ready_and_still_names_the_unavailable_models(
    tmp_path: Path,
) -> None:
    server = start_server([_repository_with_a_broken_model(tmp_path, with_add_sub=False)], "--strict-readiness=false")
    try:
        assert _status(server, "/v2/health/ready")[0] == 200
    finally:
        server.stop()
    last = _last_line(server)
    assert re.search(r" W naiad\.server\] naiad \S+ is ready: HTTP on 127\.0\.0\.1:\d+ ", last)
    assert "; 1 of 1 models is unavailable (broken): why is in the table above, or POST /v2/repository/index" in last


def test_an_empty_repository_starts_with_a_warning_that_says_what_a_model_folder_holds(tmp_path: Path) -> None:
    server = start_server([tmp_path])
    server.stop()
    warning = next(line for line in server.logs().splitlines() if "no models found" in line)
    assert f" W naiad.server] no models found in model repository '{tmp_path}', so no model will be served: " in warning
    assert "a model is a folder holding config.pbtxt and a numbered version folder with the model file" in warning
    assert "e.g. my_model/config.pbtxt and my_model/1/model.py" in warning
    assert warning.endswith("; add one and restart naiad")


def test_serving_the_make_serve_repository_logs_no_grpc_fork_warning(tmp_path: Path) -> None:
    """`make serve`'s repository: the examples plus one model per framework plugin. No library in the
    server process may fork while gRPC's threads run (OpenVINO's telemetry did: fork_posix.cc)."""
    repository = tmp_path / "models"
    shutil.copytree(EXAMPLES, repository)
    for script in sorted(ROOT.glob("plugins/*/examples/make_example.py")):
        subprocess.run([sys.executable, str(script), str(repository)], check=True, capture_output=True, timeout=300)
    assert (repository / "openvino_add_mul").is_dir()
    server = start_server([repository], timeout=180)
    server.stop()
    log = server.logs()
    assert "fork_posix" not in log
    assert "is ready: HTTP on" in log
