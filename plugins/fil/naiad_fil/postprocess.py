"""FIL's output rules: class ids, thresholds and probability columns from engine scores."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from naiad_fil.engines.base import Scores


@dataclass(frozen=True, slots=True)
class OutputRule:
    """How engine scores become ``output__0``.

    * regressors: the scores as they are (``[n, num_outputs]``);
    * classifiers without ``predict_proba``: the class id as a float (``[n, 1]``): the argmax
      of several class scores, or ``score > threshold`` for a one-score binary classifier;
    * classifiers with ``predict_proba``: the class scores; a one-score binary classifier
      reports that one column, or ``[1 - p, p]`` when the config's output has 2 columns.
    """

    classifier: bool
    predict_proba: bool
    threshold: float
    num_outputs: int
    binary_as_two_columns: bool = False

    @property
    def width(self) -> int:
        """Columns of ``output__0`` per row."""
        if not self.classifier:
            return self.num_outputs
        if not self.predict_proba:
            return 1
        return 2 if self.binary_as_two_columns else self.num_outputs

    def accepted_widths(self) -> tuple[int, ...]:
        """Output widths a config may declare (a one-score binary classifier may ask for 2)."""
        if self.classifier and self.predict_proba and self.num_outputs == 1:
            return (1, 2)
        return (self.width,)

    def apply(self, scores: Scores) -> npt.NDArray[np.float32]:
        """``output__0`` (float32, ``[n, width]``) from engine scores (``[n, num_outputs]``)."""
        values: npt.NDArray[np.float32] = np.asarray(scores, dtype=np.float32)
        if not self.classifier:
            return values
        if self.predict_proba:
            if self.binary_as_two_columns:
                return np.concatenate([1.0 - values, values], axis=1)
            return values
        if values.shape[1] == 1:
            return (values > self.threshold).astype(np.float32)
        class_ids: npt.NDArray[np.float32] = values.argmax(axis=1).astype(np.float32)
        return class_ids.reshape(-1, 1)
