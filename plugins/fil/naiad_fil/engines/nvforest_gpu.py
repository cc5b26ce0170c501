"""nvForest (RAPIDS' forest inference library, what Triton's FIL backend runs) on a CUDA device."""

from __future__ import annotations

from typing import Any

import numpy as np

from naiad_fil.engines.base import ModelFacts, Rows, Scores, as_columns
from naiad_fil.engines.treelite_gtil import load_treelite_model, treelite_facts
from naiad_fil.files import ModelSource


def available() -> bool:
    """Whether nvForest can be imported."""
    try:
        import nvforest  # noqa: F401
    except ImportError:
        return False
    return True


class NvForestEngine:
    """A Treelite model imported into nvForest on GPU ``device_id``."""

    def __init__(
        self,
        source: ModelSource,
        *,
        device_id: int,
        layout: str,
        chunk_size: int | None,
        num_outputs: int,
        allow_unknown_field: bool,
    ) -> None:
        import nvforest

        treelite_model = load_treelite_model(source, allow_unknown_field=allow_unknown_field)
        num_features, classifier = treelite_facts(treelite_model)
        self._forest: Any = nvforest.load_from_treelite_model(
            treelite_model,
            device="gpu",
            device_id=device_id,
            layout=layout,
            default_chunk_size=chunk_size,
            precision="single",
        )
        self._proba = getattr(self._forest, "predict_proba", None) if classifier else None
        self._num_outputs = num_outputs
        self.description = f"nvforest {getattr(nvforest, '__version__', '')} on cuda:{device_id}".replace("  ", " ")
        self.facts = ModelFacts(num_features, num_outputs, classifier)

    def predict(self, rows: Rows) -> Scores:
        result = self._proba(rows) if self._proba is not None else self._forest.predict(rows)
        scores = as_columns(result.get() if hasattr(result, "get") else result, len(rows))
        if self._num_outputs == 1 and scores.shape[1] == 2:
            # nvForest reports both classes of a binary classifier; FIL's engines score the positive one.
            scores = scores[:, 1:]
        return np.ascontiguousarray(scores)

    def close(self) -> None:
        self._forest = None
        self._proba = None
