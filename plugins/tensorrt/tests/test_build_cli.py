"""``naiad-tensorrt build``: its command line, its checks and its messages, on any machine."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from naiad.backend import gpu_count
from naiad_tensorrt.build_options import InputRange, parse_args, profile_problems
from naiad_tensorrt.cli import main as cli_main
from naiad_tensorrt.progress import BuildProgress

PROFILE = "INPUT0=1x4:8x4:16x4,INPUT1=1x4:8x4:16x4"


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07 not really an onnx model")
    return path


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as caught:
        parse_args(argv)
    assert caught.value.code == 2
    return capsys.readouterr().err


def test_profiles_precision_and_defaults(onnx_file: Path) -> None:
    options = parse_args([str(onnx_file), "--profile", PROFILE, "--profile", "INPUT0=32x4,INPUT1=32x4", "--fp16"])
    assert options.output == onnx_file.with_suffix(".plan")
    assert options.fp16
    assert not options.bf16
    assert options.progress
    assert options.profiles[0] == (
        InputRange("INPUT0", (1, 4), (8, 4), (16, 4)),
        InputRange("INPUT1", (1, 4), (8, 4), (16, 4)),
    )
    assert options.profiles[1][0] == InputRange("INPUT0", (32, 4), (32, 4), (32, 4))  # one shape: fixed
    options = parse_args([str(onnx_file), "-o", str(onnx_file.parent / "m.plan"), "--bf16", "--workspace-mib", "512"])
    assert options.output.name == "m.plan"
    assert options.bf16
    assert options.workspace_mib == 512
    assert not options.profiles


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("INPUT0", "profile entry 'INPUT0' must be INPUT=MIN:OPT:MAX (or INPUT=SHAPE)"),
        ("INPUT0=1x4:8x4", "profile entry 'INPUT0=1x4:8x4' has 2 shapes; give MIN:OPT:MAX or one shape"),
        ("INPUT0=1xfour", "shape '1xfour' is not dimensions separated by 'x', e.g. 1x3x224x224"),
        ("INPUT0=0x4", "shape '0x4' has a dimension below 1"),
        ("INPUT0=1x4:8x4:16x4x1", "profile entry 'INPUT0=1x4:8x4:16x4x1': MIN, OPT and MAX must have the same rank"),
        ("INPUT0=8x4:1x4:16x4", "every dimension must satisfy MIN <= OPT <= MAX"),
        ("INPUT0=1x4,INPUT0=2x4", "names input 'INPUT0' twice"),
    ],
)
def test_a_bad_profile_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str], onnx_file: Path, profile: str, expected: str
) -> None:
    error = _error(capsys, [str(onnx_file), "--profile", profile])
    assert "naiad-tensorrt build: error: argument --profile:" in error
    assert expected in error


def test_bad_paths_and_mismatched_profiles_are_refused(capsys: pytest.CaptureFixture[str], onnx_file: Path) -> None:
    missing = onnx_file.parent / "absent.onnx"
    assert f"ONNX model '{missing}' not found" in _error(capsys, [str(missing)])
    nowhere = onnx_file.parent / "no" / "such" / "model.plan"
    assert f"folder '{nowhere.parent}' does not exist" in _error(capsys, [str(onnx_file), "-o", str(nowhere)])
    assert "would overwrite the ONNX model" in _error(capsys, [str(onnx_file), "-o", str(onnx_file)])
    different = [str(onnx_file), "--profile", "INPUT0=1x4", "--profile", "INPUT1=1x4"]
    assert "every --profile must list the same inputs" in _error(capsys, different)
    assert "--workspace-mib must be at least 1" in _error(capsys, [str(onnx_file), "--workspace-mib", "0"])


def test_profiles_are_checked_against_the_networks_inputs() -> None:
    inputs = {"INPUT0": (-1, 4), "INPUT1": (-1, 4)}
    assert profile_problems([], {"x": (1, 4)}) == []
    assert profile_problems([], inputs) == [
        "the model has dynamic inputs 'INPUT0' [-1,4], 'INPUT1' [-1,4]; give their ranges with --profile"
        " INPUT0=MIN:OPT:MAX,INPUT1=MIN:OPT:MAX"
    ]
    good = (InputRange("INPUT0", (1, 4), (8, 4), (16, 4)), InputRange("INPUT1", (1, 4), (8, 4), (16, 4)))
    assert profile_problems([good], inputs) == []
    bad = (
        InputRange("INPUT0", (1, 3), (8, 3), (16, 3)),
        InputRange("SUMMAND", (1,), (1,), (1,)),
        InputRange("INPUT1", (1,), (1,), (1,)),
    )
    assert profile_problems([bad], inputs) == [
        "--profile 1: input 'INPUT0' dimension 1 is fixed at 4 in the model, so MIN, OPT and MAX must all be 4 there",
        "--profile 1 names input 'SUMMAND', which the model does not have (inputs: INPUT0, INPUT1)",
        "--profile 1: input 'INPUT1' has 2 dimensions [-1,4], the profile gives 1",
    ]
    assert profile_problems([good[:1]], inputs) == [
        "--profile 1 does not give a range for dynamic input 'INPUT1' [-1,4]"
    ]


def _expected_failure() -> list[str]:
    """What a build of a broken ONNX file reports on this machine."""
    missing = []
    if importlib.util.find_spec("tensorrt") is None:
        missing.append("building a plan needs TensorRT's Python package, which is not installed")
        missing.append("pip install 'naiad-tensorrt[gpu]'")
    if gpu_count() == 0:
        missing.append("building a plan needs an NVIDIA GPU")
    return missing or ["TensorRT's ONNX parser could not read"]


def test_the_command_says_what_the_machine_lacks(onnx_file: Path) -> None:
    command = Path(sysconfig.get_path("scripts")) / "naiad-tensorrt"
    done = subprocess.run(
        [str(command), "build", str(onnx_file), "--profile", PROFILE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("naiad-tensorrt build: error: ")
    for expected in _expected_failure():
        assert expected in done.stderr
    assert not onnx_file.with_suffix(".plan").exists()


def test_python_dash_m_runs_the_same_build(onnx_file: Path) -> None:
    module = [sys.executable, "-m", "naiad_tensorrt.build"]
    done = subprocess.run([*module, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert "--profile INPUT=MIN:OPT:MAX[,...]" in done.stdout
    done = subprocess.run([*module, str(onnx_file), "--profile", PROFILE], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("python -m naiad_tensorrt.build: error: ")
    assert _expected_failure()[0] in done.stderr


def test_the_command_knows_only_build(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main([]) == 2
    assert "usage: naiad-tensorrt build MODEL.onnx" in capsys.readouterr().err
    assert cli_main(["convert"]) == 2
    assert "naiad-tensorrt: unknown command 'convert'" in capsys.readouterr().err
    assert cli_main(["--help"]) == 0


def test_the_progress_bar_draws_the_innermost_phase() -> None:
    out = io.StringIO()
    progress = BuildProgress(out)
    progress.start("Building engine", 4)
    progress.step("Building engine", 0)
    assert progress.line("Building engine") == "Building engine [" + "#" * 7 + "." * 23 + "] 1/4"
    progress.start("Tactic selection", 2)
    progress.step("Tactic selection", 1)
    assert progress.line("Tactic selection") == "  Tactic selection [" + "#" * 30 + "] 2/2"
    progress.finish("Tactic selection")
    assert out.getvalue().endswith("Building engine [" + "#" * 7 + "." * 23 + "] 1/4")
    progress.finish("Building engine")
    assert out.getvalue().endswith("\n")
