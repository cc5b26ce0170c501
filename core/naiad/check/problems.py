"""What ``naiad check`` found, and how it prints it: one line per problem, or one JSON document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing that keeps a model from loading as configured.

    ``file`` is the file (or folder) at fault, ``line`` its 1-based line when known; ``message``
    says what is wrong, ``fix`` what to do; ``suggestion`` is the closest existing name when a
    name was misspelled.
    """

    model: str
    file: str
    line: int | None
    message: str
    fix: str
    suggestion: str | None = None

    def render(self) -> str:
        """``path:line: model 'x': what is wrong — fix``."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: model '{self.model}': {self.message} — {self.fix}"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The problems of every model checked, in model order."""

    repositories: tuple[Path, ...]
    models: tuple[str, ...]
    problems: tuple[Problem, ...]

    @property
    def failing_models(self) -> list[str]:
        return sorted({problem.model for problem in self.problems})


def render_text(report: CheckReport) -> str:
    """One line per problem, then a summary line."""
    lines = [problem.render() for problem in report.problems]
    count = len(report.models)
    checked = f"{count} model{'' if count == 1 else 's'} checked"
    if report.problems:
        failing = len(report.failing_models)
        total = len(report.problems)
        lines.append(
            f"{checked}: {total} problem{'' if total == 1 else 's'} in {failing} model{'' if failing == 1 else 's'}"
        )
    else:
        lines.append(f"{checked}: no problems")
    return "\n".join(lines)


def render_json(report: CheckReport) -> str:
    """The report as one JSON document (for CI)."""
    document = {
        "repositories": [str(path) for path in report.repositories],
        "models": list(report.models),
        "problems": [asdict(problem) for problem in report.problems],
    }
    return json.dumps(document, indent=2)


def sorted_problems(problems: Sequence[Problem], order: Sequence[str]) -> tuple[Problem, ...]:
    """``problems`` grouped by model in ``order`` (each model's in the order found), without repeats."""
    rank = {name: index for index, name in enumerate(order)}
    unique = list(dict.fromkeys(problems))
    return tuple(sorted(unique, key=lambda problem: rank.get(problem.model, len(rank))))
