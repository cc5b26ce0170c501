"""The in-process example of docs/pipelines.md runs as written, on a copy of the example models."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from naiad.testing import ModelRepositoryBuilder

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "pipelines.md"
EXAMPLES = ROOT / "examples" / "model_repository"


def _example() -> str:
    """The python block of the doc's in-process section."""
    section = DOC.read_text().split("## naiad in-process\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return str(block)


def test_the_in_process_example_runs(tmp_path: Path) -> None:
    builder = ModelRepositoryBuilder(tmp_path / "models")
    for name in ("add_sub", "string_reverse", "word_stream"):
        builder.add_model(
            name,
            (EXAMPLES / name / "config.pbtxt").read_text(),
            {"1/model.py": (EXAMPLES / name / "1" / "model.py").read_text()},
        )
    code = _example()
    assert '"examples/model_repository"' in code
    code = code.replace('"examples/model_repository"', repr(str(builder.root)))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOC), "exec"), {"__name__": "pipelines_example"})
    lines = printed.getvalue().splitlines()
    assert lines[:-1] == [
        "[11. 12. 13. 14.] [-9. -8. -7. -6.]",
        "the",
        "quick",
        "brown",
        "fox",
        "[9. 8. 7. 6.] 4",
        "[[b'daian']]",
        "['add_sub', 'word_stream']",
    ]
    assert lines[-1].startswith("INVALID_ARG [request id: <id_unknown>] expected 2 inputs but got 1 inputs")
