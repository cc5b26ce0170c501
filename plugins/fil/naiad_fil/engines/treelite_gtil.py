"""Treelite: reads every FIL format; GTIL (its general tree inference library) predicts on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from naiad_fil.engines.base import LoadError, ModelFacts, Rows, Scores, as_columns, first_line
from naiad_fil.files import ModelSource

# Treelite's TaskType: kBinaryClf = 0, kRegressor = 1, kMultiClf = 2, kLearningToRank = 3, kIsolationForest = 4.
_CLASSIFIER_TASKS = (0, 2)


def load_treelite_model(source: ModelSource, *, allow_unknown_field: bool) -> Any:
    """The file as a ``treelite.Model``; :class:`LoadError` with Treelite's message if it cannot be read."""
    import treelite

    frontend = treelite.frontend
    try:
        if source.format == "xgboost":
            return frontend.load_xgboost_model_legacy_binary(source.path)
        if source.format in ("xgboost_json", "xgboost_ubj"):
            choice = "json" if source.format == "xgboost_json" else "ubjson"
            return frontend.load_xgboost_model(
                source.path, format_choice=choice, allow_unknown_field=allow_unknown_field
            )
        if source.format == "lightgbm":
            return frontend.load_lightgbm_model(source.path)
        return treelite.Model.deserialize(source.path)
    except treelite.TreeliteError as error:
        raise LoadError(first_line(error)) from error


def treelite_facts(model: Any) -> tuple[int, bool]:
    """``(num_features, classifier)`` from a Treelite model's header."""
    header = model.get_header_accessor()
    task = int(np.asarray(header.get_field("task_type")).reshape(-1)[0])
    return int(model.num_feature), task in _CLASSIFIER_TASKS


class TreeliteEngine:
    """A Treelite model predicted with GTIL on the CPU."""

    def __init__(self, source: ModelSource, *, nthread: int, allow_unknown_field: bool) -> None:
        import treelite

        self._model = load_treelite_model(source, allow_unknown_field=allow_unknown_field)
        self._gtil = treelite.gtil
        self._nthread = nthread
        self.description = f"treelite {treelite.__version__} GTIL on cpu"
        num_features, classifier = treelite_facts(self._model)
        outputs = self.predict(np.zeros((1, num_features), dtype=np.float32)).shape[1]
        self.facts = ModelFacts(num_features, outputs, classifier)

    def predict(self, rows: Rows) -> Scores:
        return as_columns(self._gtil.predict(self._model, rows, nthread=self._nthread), len(rows))

    def close(self) -> None:
        self._model = None
