"""Shared fixtures: the tiny model, built once per test session (no download)."""

from __future__ import annotations

from pathlib import Path

import pytest

from naiad_llm.testing import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
