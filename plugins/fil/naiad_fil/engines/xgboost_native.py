"""XGBoost's own predictor (``Booster.inplace_predict``), on the CPU or a CUDA device."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from naiad_fil.engines.base import LoadError, ModelFacts, Rows, Scores, as_columns, first_line
from naiad_fil.files import ModelSource

_CLASSIFIER_PREFIXES = ("binary:", "multi:")


class XGBoostEngine:
    """One ``xgboost.Booster``; ``device`` is ``"cpu"`` or ``"cuda:<id>"``."""

    def __init__(self, source: ModelSource, *, nthread: int, device: str = "cpu") -> None:
        import xgboost

        try:
            self._booster = xgboost.Booster(model_file=str(source.path))
        except xgboost.core.XGBoostError as error:
            raise LoadError(first_line(error)) from error
        params: dict[str, Any] = {"nthread": nthread if nthread > 0 else (os.cpu_count() or 1), "device": device}
        self._booster.set_param(params)
        self._gpu = device != "cpu"
        self._xgboost = xgboost
        objective = json.loads(self._booster.save_config())["learner"]["objective"]["name"]
        # multi:softmax predicts class ids; its margins give the probabilities FIL works with.
        self._softmax_margins = objective == "multi:softmax"
        self.description = f"xgboost {xgboost.__version__} native predictor on {device}"
        num_features = self._booster.num_features()
        outputs = self.predict(np.zeros((1, num_features), dtype=np.float32)).shape[1]
        self.facts = ModelFacts(num_features, outputs, objective.startswith(_CLASSIFIER_PREFIXES))

    def predict(self, rows: Rows) -> Scores:
        scores = self._raw(rows, margin=self._softmax_margins)
        if self._softmax_margins:
            shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
            scores = shifted / shifted.sum(axis=1, keepdims=True)
        return scores

    def _raw(self, rows: Rows, *, margin: bool) -> Scores:
        if not self._gpu:
            kind = "margin" if margin else "value"
            return as_columns(self._booster.inplace_predict(rows, predict_type=kind), len(rows))
        return as_columns(self._predict_on_device(rows, margin=margin), len(rows))

    def _predict_on_device(self, rows: Rows, *, margin: bool) -> Any:
        try:
            import cupy
        except ImportError:
            # Without cupy, a host DMatrix is copied to the device by XGBoost's GPU predictor.
            return self._booster.predict(self._xgboost.DMatrix(rows), output_margin=margin)
        kind = "margin" if margin else "value"
        return cupy.asnumpy(self._booster.inplace_predict(cupy.asarray(rows), predict_type=kind))

    def close(self) -> None:
        self._booster = None  # type: ignore[assignment]


def cuda_build() -> bool:
    """Whether the installed xgboost was built with CUDA (the ``xgboost`` wheel, not ``xgboost-cpu``)."""
    try:
        import xgboost
    except ImportError:
        return False
    return bool(xgboost.build_info().get("USE_CUDA", False))
