"""Version folders and version policies (model-config.md §4)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from google.protobuf import text_format

from naiad.config import list_version_dirs, select_versions
from naiad.protocol.model_config_pb2 import ModelVersionPolicy


def test_list_version_dirs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model_dir = tmp_path / "add_sub"
    for name in ["0", "1", "10", "2", "01", "007", "1abc", "-1", "configs", "warmup", "initial_state", "v3"]:
        (model_dir / name).mkdir(parents=True)
    (model_dir / "5").write_text("a file, not a version")
    with caplog.at_level(logging.WARNING, logger="naiad.config.versions"):
        assert list_version_dirs(model_dir) == [0, 1, 2, 10]
    warnings = sorted(r.getMessage() for r in caplog.records)
    assert len(warnings) == 2
    assert warnings[0].startswith("model 'add_sub': ignoring folder '007': ")
    assert "leading zeros (use '7')" in warnings[0]
    assert warnings[1].startswith("model 'add_sub': ignoring folder '01': ")


def test_list_version_dirs_missing_model(tmp_path: Path) -> None:
    assert list_version_dirs(tmp_path / "absent") == []


def _policy(text: str) -> ModelVersionPolicy:
    return text_format.Parse(text, ModelVersionPolicy())


@pytest.mark.parametrize(
    ("policy", "available", "expected"),
    [
        ("", [3, 1, 2], [3]),  # unset: latest 1
        ("latest { num_versions: 1 }", [1, 2, 3], [3]),
        ("latest { num_versions: 2 }", [3, 10, 2], [3, 10]),
        ("latest { num_versions: 5 }", [1, 2], [1, 2]),
        ("latest { }", [1, 2], []),  # num_versions 0: nothing loads
        ("all { }", [2, 0, 1], [0, 1, 2]),
        ("latest { num_versions: 1 }", [], []),
    ],
)
def test_select_versions(policy: str, available: list[int], expected: list[int]) -> None:
    assert select_versions(_policy(policy), available) == (expected, [])


def test_specific_versions_warn_about_missing_folders() -> None:
    versions, warnings = select_versions(_policy("specific { versions: [ 3, 1, 7 ] }"), [1, 2, 3])
    assert versions == [1, 3]
    assert warnings == ["version 7 is listed in the version policy but has no folder"]
