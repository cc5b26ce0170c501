"""What the server says when startup ends: ready, serving with models unavailable, or serving nothing.

The table of models (:mod:`naiad.startup_table`) shows every model's state; these lines sum it up and
say what to do, so the last line of a startup never claims a readiness that ``/v2/health/ready`` denies.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from naiad.lifecycle import ModelLifecycle
from naiad.models import ModelState

_NAMES_SHOWN = 10

MODEL_LAYOUT = (
    "a model is a folder holding config.pbtxt and a numbered version folder with the model file, "
    "e.g. my_model/config.pbtxt and my_model/1/model.py"
)


@dataclass(frozen=True, slots=True)
class ModelControl:
    """How models get (re)loaded after startup: ``--model-control-mode`` and ``--repository-poll-secs``."""

    mode: str
    poll_secs: float

    @property
    def polling(self) -> bool:
        return self.mode == "poll" and self.poll_secs > 0

    def reload_hint(self) -> str:
        """How a fixed model gets loaded again."""
        if self.mode == "explicit":
            return "load it again with POST /v2/repository/models/<name>/load"
        if self.polling:
            return "the next repository poll loads it again"
        return "restart naiad (with --model-control-mode poll, changed models reload by themselves)"

    def add_hint(self) -> str:
        """How a model added to the repository gets loaded."""
        if self.mode == "explicit":
            return "add one, then load it with POST /v2/repository/models/<name>/load"
        if self.polling:
            return "the next repository poll loads a model added there"
        return "add one and restart naiad"


def unavailable_models(lifecycle: ModelLifecycle) -> list[str]:
    """The models strict readiness waits for: those that failed, or have a version that is not READY."""
    names = []
    for record in lifecycle.records():
        versions = record.versions.values()
        if record.error or any(s.state is not ModelState.READY and s.reason != "unloaded" for s in versions):
            names.append(record.name)
    return sorted(names)


def log_startup_end(
    logger: logging.Logger,
    version: str,
    listeners: str,
    lifecycle: ModelLifecycle,
    *,
    strict_readiness: bool,
    control: ModelControl,
) -> None:
    """The last line of startup: ``naiad <version> is ready: <listeners>``, unless models are unavailable."""
    unavailable = unavailable_models(lifecycle)
    if not unavailable:
        logger.info("naiad %s is ready: %s", version, listeners)
        return
    total = len(lifecycle.records())
    count = f"1 of {total} models is" if len(unavailable) == 1 else f"{len(unavailable)} of {total} models are"
    if strict_readiness:
        logger.warning(
            "naiad %s is serving but not ready: %s; %s unavailable (%s), so /v2/health/ready answers 400 until "
            "every model is READY (--strict-readiness true). Why: the table above, or POST /v2/repository/index. "
            "Once fixed, %s; or run with --strict-readiness false to be ready with the models that loaded",
            version,
            listeners,
            count,
            _names(unavailable),
            control.reload_hint(),
        )
    else:
        logger.warning(
            "naiad %s is ready: %s; %s unavailable (%s): why is in the table above, or POST /v2/repository/index",
            version,
            listeners,
            count,
            _names(unavailable),
        )


def warn_if_no_models(
    logger: logging.Logger, repositories: Sequence[Path], found: Collection[str], control: ModelControl
) -> None:
    """An empty repository serves nothing: say so, where naiad looked and what a model folder holds."""
    if found:
        return
    logger.warning(
        "no models found in model repository %s, so no model will be served: %s (see README.md, 'Adding a model'); %s",
        ", ".join(f"'{path}'" for path in repositories),
        MODEL_LAYOUT,
        control.add_hint(),
    )


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown if len(names) <= _NAMES_SHOWN else f"{shown} and {len(names) - _NAMES_SHOWN} more"
