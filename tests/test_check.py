"""``naiad check``, run as the real command on repositories with one broken model per kind of problem."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import naiad
from naiad.backend import BackendContext, BackendModel, InstanceContext, ModelInstance, ModelLoadContext
from naiad.check import RepositoryChecker
from naiad.plugins import BackendRegistry
from naiad.protocol.model_config_pb2 import DataType
from naiad.testing import ModelRepositoryBuilder

IDENTITY = """
backend: "identity"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""

ENSEMBLE = """
platform: "ensemble"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "%(model)s"
      model_version: -1
      input_map { key: "%(input)s" value: "IN" }
      output_map { key: "OUTPUT0" value: "OUT" }
    }
  ]
}
"""

AUTO_COMPLETED = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "TEXT", "data_type": "TYPE_STRING", "dims": [1]})
        config.add_output({"name": "LENGTH", "data_type": "TYPE_INT64", "dims": [1]})
        return config

    def execute(self, requests):
        return []
"""

VERSION = {"1/.keep": ""}


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def naiad_check(*args: str | Path) -> Run:
    done = subprocess.run(
        [sys.executable, "-m", "naiad", "check", *map(str, args)], capture_output=True, text=True, timeout=120
    )
    return Run(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def broken_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One healthy model, and one model per kind of problem."""
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("broken"))
    builder.add_model("healthy", IDENTITY, VERSION)
    builder.add_model("syntax_error", 'backend: "identity"\nmax_batch_size: 4\ninput [ { name: "X"\n', VERSION)
    builder.add_model("misspelled_field", 'backend: "identity"\nmax_batch_sise: 4\n', VERSION)
    builder.add_model("misspelled_enum", IDENTITY.replace("TYPE_FP32 dims", "TYPE_FP23 dims", 1), VERSION)
    builder.add_model("misspelled_backend", IDENTITY.replace('"identity"', '"identiy"'), VERSION)
    builder.add_model("missing_model_file", 'backend: "python"\n', {"1/README": "model.py goes here"})
    builder.add_model("breaks_rules", IDENTITY.replace("[ 2 ]", "[ 0 ]"), VERSION)
    builder.add_model("no_version", IDENTITY)
    builder.add_model("wrong_tensor", ENSEMBLE % {"model": "healthy", "input": "INPUT"}, VERSION)
    builder.add_model("wrong_model", ENSEMBLE % {"model": "healty", "input": "INPUT0"}, VERSION)
    builder.add_model("on_broken_model", ENSEMBLE % {"model": "breaks_rules", "input": "INPUT0"}, VERSION)
    return builder.root


@pytest.fixture(scope="module")
def text_run(broken_repository: Path) -> Run:
    return naiad_check(broken_repository)


@pytest.fixture(scope="module")
def json_run(broken_repository: Path) -> Run:
    return naiad_check(broken_repository, "--format", "json")


def _lines_of(run: Run, model: str) -> list[str]:
    return [line for line in run.stdout.splitlines() if f": model '{model}': " in line]


def _only_line(run: Run, model: str) -> str:
    lines = _lines_of(run, model)
    assert len(lines) == 1, run.stdout
    return lines[0]


def test_problems_exit_with_status_1_and_a_summary(text_run: Run) -> None:
    assert text_run.returncode == 1, text_run.stderr
    assert text_run.stdout.splitlines()[-1] == "11 models checked: 11 problems in 10 models"


def test_healthy_model_has_no_problem(text_run: Run) -> None:
    assert _lines_of(text_run, "healthy") == []


def test_syntax_error_names_file_and_line(text_run: Run, broken_repository: Path) -> None:
    line = _only_line(text_run, "syntax_error")
    assert line.startswith(f"{broken_repository / 'syntax_error' / 'config.pbtxt'}:3: model 'syntax_error': ")
    assert 'expected "}"' in line


def test_misspelled_field_suggests_the_field(text_run: Run, broken_repository: Path) -> None:
    line = _only_line(text_run, "misspelled_field")
    assert line == (
        f"{broken_repository / 'misspelled_field' / 'config.pbtxt'}:2: model 'misspelled_field': no field named "
        "'max_batch_sise' in inference.ModelConfig; did you mean 'max_batch_size'? — replace 'max_batch_sise' with "
        "'max_batch_size'"
    )


def test_misspelled_enum_value_suggests_the_value(text_run: Run) -> None:
    line = _only_line(text_run, "misspelled_enum")
    assert ":4: model 'misspelled_enum': 'TYPE_FP23' is not a value of inference.DataType" in line
    assert line.endswith("— replace 'TYPE_FP23' with 'TYPE_FP32'")


def test_misspelled_backend_suggests_an_installed_one(text_run: Run) -> None:
    line = _only_line(text_run, "misspelled_backend")
    assert "/misspelled_backend/config.pbtxt:2: " in line
    assert "no installed distribution provides backend 'identiy'" in line
    assert "Installed backends: " in line
    assert "identity" in line.split("Installed backends: ", 1)[1]
    assert line.endswith("— replace 'identiy' with 'identity'")


def test_missing_model_file_is_reported(text_run: Run, broken_repository: Path) -> None:
    line = _only_line(text_run, "missing_model_file")
    version = broken_repository / "missing_model_file" / "1"
    assert f"Python model file not found in '{version / 'model.py'}'" in line
    assert line.endswith(f"— fix the model's files in {version} or its config, as the message says")


def test_each_broken_rule_is_its_own_line(text_run: Run) -> None:
    lines = _lines_of(text_run, "breaks_rules")
    assert len(lines) == 2
    assert ":4: model 'breaks_rules': input[0] 'INPUT0': dims [0]: each dimension must be >= 1" in lines[0]
    assert ":5: model 'breaks_rules': output[0] 'OUTPUT0': dims [0]: each dimension must be >= 1" in lines[1]


def test_model_without_version_folder(text_run: Run, broken_repository: Path) -> None:
    line = _only_line(text_run, "no_version")
    assert "has no loadable version" in line
    assert f"add a numbered version folder (e.g. {broken_repository / 'no_version' / '1'})" in line


def test_ensemble_step_naming_a_missing_tensor_suggests_the_models_tensor(text_run: Run) -> None:
    line = _only_line(text_run, "wrong_tensor")
    assert "/wrong_tensor/config.pbtxt:11: " in line
    assert "ensemble tensor IN is mapping to non-existing input INPUT in model healthy" in line
    assert line.endswith("— replace 'INPUT' with 'INPUT0'")


def test_ensemble_step_naming_a_missing_model_suggests_the_model(text_run: Run) -> None:
    line = _only_line(text_run, "wrong_model")
    assert "/wrong_model/config.pbtxt:9: " in line
    assert "contains models that are not available or ambiguous: healty" in line
    assert line.endswith("— replace 'healty' with 'healthy'")


def test_ensemble_waits_for_its_broken_step_model(text_run: Run) -> None:
    line = _only_line(text_run, "on_broken_model")
    assert "its steps use models that have problems of their own: breaks_rules" in line


def test_json_report_has_each_problem_with_its_fields(text_run: Run, json_run: Run) -> None:
    assert json_run.returncode == 1
    report: dict[str, Any] = json.loads(json_run.stdout)
    problems = report["problems"]
    assert len(problems) == len(text_run.stdout.splitlines()) - 1
    assert set(problems[0]) == {"model", "file", "line", "message", "fix", "suggestion"}
    assert "healthy" in report["models"]
    by_model = {problem["model"]: problem for problem in problems}
    field = by_model["misspelled_field"]
    assert field["line"] == 2
    assert field["file"].endswith("/misspelled_field/config.pbtxt")
    assert field["suggestion"] == "max_batch_size"
    assert field["fix"] == "replace 'max_batch_sise' with 'max_batch_size'"
    assert by_model["misspelled_backend"]["suggestion"] == "identity"
    assert by_model["wrong_tensor"]["suggestion"] == "INPUT0"
    assert by_model["missing_model_file"]["line"] is None
    assert by_model["missing_model_file"]["suggestion"] is None


@pytest.fixture(scope="module")
def clean_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = ModelRepositoryBuilder(tmp_path_factory.mktemp("clean"))
    builder.add_model("identity", IDENTITY, VERSION)
    builder.add_model("pipeline", ENSEMBLE % {"model": "identity", "input": "INPUT0"}, VERSION)
    builder.add_python_model("auto_completed", AUTO_COMPLETED)  # no config.pbtxt: the model completes it
    return builder.root


def test_clean_repository_exits_0(clean_repository: Path) -> None:
    run = naiad_check(clean_repository)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == "3 models checked: no problems\n"
    report = json.loads(naiad_check(clean_repository, "--format", "json").stdout)
    assert report == {
        "repositories": [str(clean_repository)],
        "models": ["auto_completed", "identity", "pipeline"],
        "problems": [],
    }


def test_without_auto_complete_a_model_needs_its_config(clean_repository: Path) -> None:
    run = naiad_check(clean_repository, "--disable-auto-complete-config")
    assert run.returncode == 1
    line = _only_line(run, "auto_completed")
    assert "has no config.pbtxt, which is required when auto-complete is disabled" in line


def test_model_in_two_repositories_is_a_problem(clean_repository: Path, tmp_path: Path) -> None:
    ModelRepositoryBuilder(tmp_path).add_model("identity", IDENTITY, VERSION)
    run = naiad_check(clean_repository, tmp_path)
    assert run.returncode == 1
    line = _only_line(run, "identity")
    assert f"appears in several model repositories ({clean_repository / 'identity'}, {tmp_path / 'identity'})" in line
    assert line.endswith("— keep one of them")


def test_missing_repository_is_a_usage_error(tmp_path: Path) -> None:
    run = naiad_check(tmp_path / "absent")
    assert run.returncode == 2
    assert run.stdout == ""
    assert f"model repository '{tmp_path / 'absent'}' does not exist or is not a folder" in run.stderr


COMPLETED_ENSEMBLE = """
platform: "ensemble"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling {
  step [ { model_name: "completed" input_map { key: "X" value: "IN" } output_map { key: "X_OUT" value: "OUT" } } ]
}
"""


class _CompletingBackend:
    """A backend that, as in the server, gets a server handle and completes the config from its model file."""

    def __init__(self) -> None:
        self.loop_running: list[bool] = []
        self.finalized: list[str] = []
        self.instances = 0

    @naiad.hookimpl
    def naiad_backend_initialize(self, context: BackendContext) -> None:
        context.server.metrics.family("completing_loads", "Models loaded", "counter")

    @naiad.hookimpl
    def naiad_load_model(self, context: ModelLoadContext) -> BackendModel:
        self.loop_running.append(context.server is not None and context.server.loop.is_running())
        name = (context.version_dir / "tensor.txt").read_text().strip()
        context.config.input.add(name=name, data_type=DataType.TYPE_FP32, dims=[1])
        context.config.output.add(name=name + "_OUT", data_type=DataType.TYPE_FP32, dims=[1])
        model = BackendModel()
        model.finalize = lambda: self.finalized.append(context.model_name)  # type: ignore[method-assign]
        return model

    @naiad.hookimpl
    def naiad_create_instance(self, model: BackendModel, context: InstanceContext) -> ModelInstance:
        self.instances += 1
        return ModelInstance()


def test_backends_complete_configs_with_a_server_handle_and_are_released(tmp_path: Path) -> None:
    builder = ModelRepositoryBuilder(tmp_path)
    builder.add_model("completed", 'backend: "completing"', {"1/tensor.txt": "X"})
    builder.add_model("pipeline", COMPLETED_ENSEMBLE, VERSION)  # names the tensors only the backend adds
    backend = _CompletingBackend()
    registry = BackendRegistry(entry_points=[])
    registry.register("completing", backend)
    report = RepositoryChecker([tmp_path], registry=registry).run()
    assert report.problems == ()
    assert report.models == ("completed", "pipeline")
    assert backend.loop_running == [True]
    assert backend.finalized == ["completed"]
    assert backend.instances == 0


def test_model_config_name_checks_the_custom_config_where_a_model_has_one(tmp_path: Path) -> None:
    """As `naiad serve --model-config-name h100` reads it: the broken custom config is the one checked."""
    builder = ModelRepositoryBuilder(tmp_path)
    builder.add_model("tuned", IDENTITY, {**VERSION, "configs/h100.pbtxt": 'backend: "identity"\nmax_batch_sise: 4\n'})
    assert naiad_check(tmp_path).returncode == 0  # config.pbtxt is healthy
    run = naiad_check(tmp_path, "--model-config-name", "h100")
    assert run.returncode == 1
    (line,) = _lines_of(run, "tuned")
    assert str(tmp_path / "tuned" / "configs" / "h100.pbtxt") in line
    assert "max_batch_sise" in line
