"""The loaded model (shared facts and rules) and its instances (one engine each)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from naiad.backend import BackendModel, ModelConfig, ModelInstanceGroup, TensorInstance, invalid_arg
from naiad_fil.autocomplete import INPUT_NAME, OUTPUT_NAME
from naiad_fil.engines import Engine, ModelFacts, load_cpu_engine, load_gpu_engine
from naiad_fil.files import ModelSource
from naiad_fil.parameters import FilParameters
from naiad_fil.postprocess import OutputRule

_log = logging.getLogger("naiad.fil")


class FilModel(BackendModel):
    """One version of a tree model: where it is, what it is, and the engine loaded to inspect it.

    The engine loaded at model load goes to the first CPU instance; every other instance
    loads its own, so no engine is shared between instance threads. When the final config has
    no CPU instance, the engine is closed as soon as the config is known.
    """

    def __init__(
        self, source: ModelSource, params: FilParameters, facts: ModelFacts, rule: OutputRule, engine: Engine
    ) -> None:
        self.source = source
        self.params = params
        self.facts = facts
        self.rule = rule
        self._spare: Engine | None = engine
        self._lock = threading.Lock()

    def configured(self, config: ModelConfig) -> None:
        """Close the load-time engine now if no CPU instance will take it."""
        cpu_kinds = (ModelInstanceGroup.KIND_CPU, ModelInstanceGroup.KIND_MODEL)
        if not any(group.kind in cpu_kinds and group.count > 0 for group in config.instance_group):
            self.finalize()
            _log.info("model '%s': no CPU instance; closed the engine loaded to read the model", config.name)

    def engine_for(self, kind: str, device_id: int) -> Engine:
        """A new engine for an instance of ``kind`` (``CPU``, ``GPU`` or ``MODEL``)."""
        if kind == "GPU":
            return load_gpu_engine(self.source, self.params, device_id, self.facts)
        with self._lock:
            spare, self._spare = self._spare, None
        return spare if spare is not None else load_cpu_engine(self.source, self.params)

    def cpu_engine_for_small_batches(self) -> Engine | None:
        """The CPU engine a GPU instance uses for batches of at most ``transfer_threshold`` rows."""
        if self.params.transfer_threshold <= 0:
            return None
        return load_cpu_engine(self.source, self.params)

    def finalize(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()


class FilInstance(TensorInstance):
    """Runs ``input__0`` through its engine and FIL's output rule."""

    def __init__(
        self, config: ModelConfig, model: FilModel, engine: Engine, small_batch_engine: Engine | None = None
    ) -> None:
        super().__init__(config)
        self._engine = engine
        self._small_batch_engine = small_batch_engine
        self._transfer_threshold = model.params.transfer_threshold
        self._rule = model.rule
        self._num_features = model.facts.num_features

    def run(self, inputs: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
        data = inputs.get(INPUT_NAME)
        if data is None:
            raise invalid_arg(f"model '{self.model_name}' needs input '{INPUT_NAME}'")
        if data.ndim == 0 or data.shape[-1] != self._num_features:
            raise invalid_arg(
                f"model '{self.model_name}': input '{INPUT_NAME}' has shape {list(data.shape)}, but the model takes"
                f" {self._num_features} features per row"
            )
        leading = data.shape[:-1]
        rows = np.ascontiguousarray(data, dtype=np.float32).reshape(-1, self._num_features)
        engine = self._engine
        if self._small_batch_engine is not None and len(rows) <= self._transfer_threshold:
            engine = self._small_batch_engine
        output = self._rule.apply(engine.predict(rows))
        return {OUTPUT_NAME: squeezed(output.reshape(*leading, output.shape[1]))}

    def finalize(self) -> None:
        for engine in (self._engine, self._small_batch_engine):
            if engine is not None:
                engine.close()


def squeezed(output: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``output`` without its dimensions of size 1 after the first (the rows): Triton's FIL backend
    answers in that shape (``[n]`` for a regressor or class ids, not ``[n, 1]``), whatever the config's
    dims say."""
    return output.reshape(output.shape[0], *(dim for dim in output.shape[1:] if dim != 1))
