"""Loading: model files, auto-complete, initialize args, isolation, get_model_dir, lifecycle."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import naiad_python
from naiad.backend import BackendInfo, DataType, ErrorCode, ModelFormat, NaiadError
from naiad.testing import load_model as load_in_process
from naiad_python import loader

from .conftest import LoadModel, PythonTestModel, ready
from .models import (
    ADD_SUB,
    AUTO_COMPLETE,
    LIFECYCLE,
    RAISE_IN_INITIALIZE,
    PythonModelSpec,
    isolation_model,
)

ONE = {"IN": np.array([1], np.int32)}


def test_backend_info_detects_models_by_their_model_py(load_model: LoadModel) -> None:
    assert naiad_python.naiad_backend_info() == BackendInfo("python", (ModelFormat("model.py"),))
    config = str(ADD_SUB.config)
    assert 'backend: "python"' in config
    spec = PythonModelSpec(ADD_SUB.model_py, config=config.replace('backend: "python"', ""))
    assert load_model("detected", spec).config.backend == "python"


def test_importing_the_backend_imports_no_submodule() -> None:
    code = "import sys, naiad_python; print(sorted(m for m in sys.modules if m.startswith('naiad_python.')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_initialize_receives_tritons_args(load_model: LoadModel) -> None:
    model = load_model("lifecycle", LIFECYCLE)
    args = json.loads(model.infer(ONE).outputs()["ARGS"][0])
    assert args == {
        "model_config": model.config_json,
        "model_instance_kind": "CPU",
        "model_instance_name": "lifecycle_0",
        "model_instance_device_id": "0",
        "model_repository": str(model.model_dir),
        "model_version": "1",
        "model_name": "lifecycle",
    }
    assert json.loads(args["model_config"])["backend"] == "python"


def test_auto_complete_without_config_file(load_model: LoadModel) -> None:
    model = load_model("auto", AUTO_COMPLETE, auto_complete=True)
    config = model.config
    assert config.backend == "python"
    assert config.max_batch_size == 8
    assert config.HasField("dynamic_batching")
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [("INPUT0", DataType.TYPE_FP32, [4])]
    assert [(t.name, t.data_type, list(t.dims)) for t in config.output] == [("OUTPUT0", DataType.TYPE_FP32, [4])]
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(model.infer({"INPUT0": data}).outputs()["OUTPUT0"], data * 2)


def test_auto_complete_sees_the_defaults_triton_fills_in_first(load_model: LoadModel) -> None:
    """As in Triton: the config handed to auto_complete_config already has its version policy,
    optimization and instance group; a model may read them."""
    spec = PythonModelSpec(
        """
        import json
        from pathlib import Path

        class TritonPythonModel:
            @staticmethod
            def auto_complete_config(config):
                Path(__file__).with_name("seen.json").write_text(json.dumps(config.as_dict()))
                return config

            def execute(self, requests):
                return []
        """,
        config='name: "{name}" backend: "python" max_batch_size: 8 '
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]',
    )
    model = load_model("seen", spec, auto_complete=True)
    seen = json.loads((model.model_dir / "1" / "seen.json").read_text())
    assert seen["instance_group"] == [
        {
            "name": "seen",
            "kind": "KIND_CPU",
            "count": 1,
            "gpus": [],
            "secondary_devices": [],
            "profile": [],
            "passive": False,
            "host_policy": "",
        }
    ]
    assert seen["optimization"] == {
        "priority": "PRIORITY_DEFAULT",
        "input_pinned_memory": {"enable": True},
        "output_pinned_memory": {"enable": True},
        "gather_kernel_buffer_threshold": 0,
        "eager_batching": False,
    }
    assert seen["version_policy"] == {"latest": {"num_versions": 1}}
    assert model.config.instance_group[0].count == 1


def test_auto_complete_disabled_leaves_the_config_alone(load_model: LoadModel) -> None:
    spec = PythonModelSpec(
        AUTO_COMPLETE.model_py,
        config='name: "{name}" backend: "python" max_batch_size: 0 '
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]',
    )
    model = load_model("auto", spec, auto_complete=False)
    assert model.config.max_batch_size == 0
    assert not model.config.HasField("dynamic_batching")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "return None",
            "auto_complete_config function in model 'auto' must return a valid pb.ModelConfig object.",
        ),
        # Triton lists one more frame, in its own triton_python_backend_utils.py, that raised; naiad's
        # pb_utils code is left out of the At: block
        (
            "config.set_max_batch_size(2); return config",
            "ValueError: configuration specified max_batch_size 4, but in auto-complete-config function for "
            "model 'auto' specified max_batch_size 2\n\nAt:\n  {file}(4): auto_complete_config\n",
        ),
        (
            'config.add_input({"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [4]}); return config',
            "ValueError: unable to load model 'auto', configuration expects datatype TYPE_FP32 for input "
            "'INPUT0', model provides TYPE_INT32\n\nAt:\n  {file}(4): auto_complete_config\n",
        ),
    ],
)
def test_auto_complete_failures(load_model: LoadModel, repo: Path, body: str, message: str) -> None:
    spec = PythonModelSpec(
        f"""
        class TritonPythonModel:
            @staticmethod
            def auto_complete_config(config):
                {body}

            def execute(self, requests):
                return []
        """,
        config='name: "{name}" backend: "python" max_batch_size: 4 '
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]',
    )
    with pytest.raises(NaiadError) as excinfo:
        load_model("auto", spec, auto_complete=True)
    assert excinfo.value.message == message.format(file=repo / "auto" / "1" / "model.py")


def test_exception_in_initialize_fails_the_load(load_model: LoadModel, repo: Path) -> None:
    with pytest.raises(NaiadError) as excinfo:
        load_model("broken", RAISE_IN_INITIALIZE)
    assert excinfo.value.code is ErrorCode.INTERNAL
    model_file = repo / "broken" / "1" / "model.py"
    assert excinfo.value.message == f"RuntimeError: no weights found\n\nAt:\n  {model_file}(3): initialize\n"
    assert not [name for name in sys.modules if "broken" in name and name.startswith("_naiad_python_models")]


def test_import_error_fails_the_load(load_model: LoadModel, repo: Path) -> None:
    spec = PythonModelSpec("import not_a_module_anywhere\n", config=ADD_SUB.config)
    with pytest.raises(NaiadError) as excinfo:
        load_model("bad_import", spec)
    # as in Triton, the frames of the import system that ran the model file follow it (their lines are
    # the interpreter's)
    lines = re.sub(r"\(\d+\): ", "(N): ", excinfo.value.message).split("\n")
    assert lines == [
        "ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        "",
        "At:",
        f"  {repo / 'bad_import' / '1' / 'model.py'}(N): <module>",
        "  <frozen importlib._bootstrap>(N): _call_with_frames_removed",
        "  <frozen importlib._bootstrap_external>(N): exec_module",
        "  <frozen importlib._bootstrap>(N): _load_unlocked",
        "  <frozen importlib._bootstrap>(N): _find_and_load_unlocked",
        "  <frozen importlib._bootstrap>(N): _find_and_load",
        "",
    ]


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("", "Python model file not found in '{dir}/1/model.py'"),
        ("other.py", "Python model file not found in '{dir}/1/other.py'"),
        ("model.txt", "Model name must end with '.py'. Model name is \"model.txt\""),
    ],
)
def test_model_file_problems(repo: Path, filename: str, message: str) -> None:
    model_dir = repo / "missing"
    (model_dir / "1").mkdir(parents=True)
    config = f'name: "missing" backend: "python" default_model_filename: "{filename}"'
    (model_dir / "config.pbtxt").write_text(config)
    with pytest.raises(NaiadError) as excinfo:
        load_in_process(model_dir)
    assert excinfo.value.message.startswith("failed to load python model 'missing' version 1: ")
    assert message.format(dir=model_dir) in excinfo.value.message


def test_custom_model_filename(load_model: LoadModel) -> None:
    spec = PythonModelSpec(
        "raise RuntimeError('model.py must not be imported')\n",
        config=str(ADD_SUB.config) + '\ndefault_model_filename: "add_sub_impl.py"',
        files={"add_sub_impl.py": ADD_SUB.model_py},
    )
    model = load_model("custom", spec)
    four = np.ones(4, np.float32)
    np.testing.assert_array_equal(model.infer({"INPUT0": four, "INPUT1": four}).outputs()["OUTPUT0"], four * 2)


def test_models_and_instances_do_not_share_modules(load_model: LoadModel) -> None:
    first = load_model("first", isolation_model("one"))
    second = load_model("second", isolation_model("two"))

    def outputs(model: PythonTestModel, instance: int) -> dict[str, list[object]]:
        collected = model.infer(ONE, instance=instance)
        response = collected.only()
        assert response.error is None, response.error
        return {tensor.name: tensor.data.tolist() for tensor in response.outputs}

    a0 = outputs(first, 0)
    assert a0["LABEL"] == [b"one"]
    assert a0["SAME"] == [True]  # `import helpers` and `from . import helpers` are one module
    assert a0["COUNT"] == [1, 1]
    assert a0["SHARED"] == [b"shared-one"]
    assert outputs(first, 0)["COUNT"] == [2, 2]
    assert outputs(first, 1)["COUNT"] == [1, 1]  # the other instance has its own globals
    b0 = outputs(second, 0)
    assert b0["LABEL"] == [b"two"]
    assert b0["SHARED"] == [b"shared-two"]
    assert b0["COUNT"] == [1, 1]


def test_installed_packages_win_over_same_named_model_files(load_model: LoadModel) -> None:
    spec = PythonModelSpec(
        ADD_SUB.model_py.replace("import json", "import json\n    import numpy\n    import pluggy"),
        config=ADD_SUB.config,
        files={
            "numpy.py": "raise ImportError('the model directory must not shadow numpy')\n",
            "json.py": "raise ImportError('the model directory must not shadow the standard library')\n",
        },
        model_dir_files={"pluggy.py": "raise ImportError('the model directory must not shadow pluggy')\n"},
    )
    model = load_model("shadowing", spec)
    four = np.ones(4, np.float32)
    np.testing.assert_array_equal(model.infer({"INPUT0": four, "INPUT1": four}).outputs()["OUTPUT0"], four * 2)


def test_missing_model_class(load_model: LoadModel) -> None:
    with pytest.raises(NaiadError) as excinfo:
        load_model("classless", PythonModelSpec("X = 1\n", config=ADD_SUB.config))
    assert "does not define class TritonPythonModel" in excinfo.value.message


def test_get_model_dir_answers_for_each_model(load_model: LoadModel) -> None:
    first = load_model("first", isolation_model("one"))
    second = load_model("second", isolation_model("two"))
    for model in (first, second):
        dirs = model.infer(ONE).outputs()["MODEL_DIR"].tolist()
        # from execute, from a helper module, from a thread, at import time
        assert dirs == [str(model.model_dir / "1").encode()] * 4


def test_get_model_dir_outside_model_code_raises() -> None:
    import triton_python_backend_utils as pb_utils

    with pytest.raises(pb_utils.TritonModelException, match="only works when called from a model's code"):
        pb_utils.get_model_dir()


def test_finalize_and_is_ready(load_model: LoadModel) -> None:
    model = load_model("lifecycle", LIFECYCLE)
    instance = model.instances[0]
    assert ready(instance)
    model.infer(ONE, parameters={"ready": False}).only()
    assert not ready(instance)
    model.close()
    assert (model.model_dir / "1" / "finalized-lifecycle_0").read_text() == "bye"
    assert not [name for name in sys.modules if name.startswith("_naiad_python_models.lifecycle")]


def test_model_directories_are_on_sys_path_while_loaded(load_model: LoadModel, isolation: str) -> None:
    model = load_model("add_sub", ADD_SUB)
    if isolation == "process":  # the model's code runs in its worker, never in this process
        assert str(model.model_dir / "1") not in sys.path
        assert not [name for name in sys.modules if name.startswith("_naiad_python_models.add_sub")]
        model.close()
        return
    assert str(model.model_dir / "1") in sys.path
    assert str(model.model_dir) in sys.path
    model.close()
    assert str(model.model_dir / "1") not in sys.path


def test_unloading_while_other_threads_import(tmp_path: Path) -> None:
    """Auto-complete unloads its throw-away unit while other models load; imports elsewhere must not
    break the unload (they change sys.modules' size under it)."""
    model_file = tmp_path / "1" / "model.py"
    model_file.parent.mkdir()
    model_file.write_text("class TritonPythonModel:\n    pass\n")
    stop = threading.Event()

    def import_elsewhere() -> None:
        while not stop.is_set():
            for count in range(256):
                sys.modules[f"_naiad_test_churn_{count}"] = sys
            for count in range(256):
                sys.modules.pop(f"_naiad_test_churn_{count}", None)

    churn = threading.Thread(target=import_elsewhere, daemon=True)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as a busy server does
    churn.start()
    try:
        for attempt in range(200):
            unit = loader.load_model_module(
                model_name="churn", version=1, model_dir=tmp_path, model_file=model_file, tag=f"t{attempt}"
            )
            loader.unload_model_module(unit)
            assert unit.package not in sys.modules
    finally:
        stop.set()
        churn.join()
        sys.setswitchinterval(switch_interval)
        for name in [name for name in tuple(sys.modules) if name.startswith("_naiad_test_churn_")]:
            sys.modules.pop(name, None)
