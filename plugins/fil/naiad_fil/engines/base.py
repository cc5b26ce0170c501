"""What every inference engine offers: the model's shape facts and a row-wise ``predict``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

_NATIVE_PREFIX = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+:\d+: ")

Rows = npt.NDArray[np.float32]
Scores = npt.NDArray[Any]


class LoadError(Exception):
    """A library could not read the model file; the message is the library's own first line."""


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the loaded model says about itself.

    ``num_outputs`` is the number of columns ``predict`` returns per row: 1 for regressors and
    binary classifiers that score only the positive class, the class count otherwise.
    ``classifier`` is whether the training objective is a classification one (None: unknown).
    """

    num_features: int
    num_outputs: int
    classifier: bool | None


class Engine(Protocol):
    """A loaded tree model on one device; one per model instance."""

    description: str
    facts: ModelFacts

    def predict(self, rows: Rows) -> Scores:
        """Scores for ``rows`` (float32, ``[n, num_features]``): ``[n, num_outputs]``.

        Scores are what the model's objective produces (probabilities for classifiers,
        values for regressors), before FIL's class-id or threshold post-processing.
        """
        ...

    def close(self) -> None:
        """Release the engine's memory."""
        ...


def as_columns(scores: Any, rows: int) -> Scores:
    """A library's prediction as a 2-D ``[rows, k]`` numpy array."""
    array = np.asarray(scores)
    return array.reshape(rows, -1)


def count_outputs(engine: Engine, num_features: int) -> int:
    """Columns the engine returns per row, found by predicting one all-zero row."""
    return int(engine.predict(np.zeros((1, num_features), dtype=np.float32)).shape[1])


def first_line(error: BaseException) -> str:
    """A library error's first line, without the ``[hh:mm:ss] source.cc:123:`` prefix native libraries add."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return _NATIVE_PREFIX.sub("", lines[0]) if lines else type(error).__name__
