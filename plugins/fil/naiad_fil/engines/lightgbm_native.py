"""LightGBM's own predictor (``Booster.predict``) for ``model.txt`` files."""

from __future__ import annotations

import numpy as np

from naiad_fil.engines.base import LoadError, ModelFacts, Rows, Scores, as_columns, first_line
from naiad_fil.files import ModelSource

_CLASSIFIER_OBJECTIVES = ("binary", "multiclass", "multiclassova")


class LightGBMEngine:
    """One ``lightgbm.Booster`` predicting on the CPU."""

    def __init__(self, source: ModelSource, *, nthread: int) -> None:
        import lightgbm

        try:
            self._booster = lightgbm.Booster(model_file=str(source.path))
        except lightgbm.basic.LightGBMError as error:
            raise LoadError(first_line(error)) from error
        self._nthread = max(nthread, 0)  # LightGBM: <= 0 means OpenMP's default (all cores)
        self.description = f"lightgbm {lightgbm.__version__} native predictor on cpu"
        num_features = self._booster.num_feature()
        outputs = self.predict(np.zeros((1, num_features), dtype=np.float32)).shape[1]
        self.facts = ModelFacts(num_features, outputs, _objective(source) in _CLASSIFIER_OBJECTIVES)

    def predict(self, rows: Rows) -> Scores:
        return as_columns(self._booster.predict(rows, num_threads=self._nthread), len(rows))

    def close(self) -> None:
        self._booster.free_dataset()
        self._booster = None  # type: ignore[assignment]


def _objective(source: ModelSource) -> str:
    """The objective name from the model file's header (``objective=binary sigmoid:1``)."""
    with source.path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("objective="):
                words = line.split("=", 1)[1].split()
                return words[0] if words else ""
            if line.startswith("Tree="):
                break
    return ""
