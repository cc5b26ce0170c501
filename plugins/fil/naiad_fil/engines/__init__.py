"""Inference engines for tree models, and which one a model instance gets.

CPU (chosen by measurement, see the README): the library's own predictor for XGBoost and
LightGBM files when that library is installed, Treelite GTIL otherwise and for Treelite
checkpoints. GPU: XGBoost's CUDA predictor for XGBoost files, nvForest for anything else.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable

from naiad.backend import ErrorCode, NaiadError
from naiad_fil.engines.base import Engine, LoadError, ModelFacts
from naiad_fil.files import ModelSource
from naiad_fil.parameters import FilParameters

__all__ = ["Engine", "ModelFacts", "load_cpu_engine", "load_gpu_engine"]

_log = logging.getLogger("naiad.fil")

_NATIVE_LIBRARY = {
    "xgboost": "xgboost",
    "xgboost_json": "xgboost",
    "xgboost_ubj": "xgboost",
    "lightgbm": "lightgbm",
}


def load_cpu_engine(source: ModelSource, params: FilParameters) -> Engine:
    """The CPU engine ``naiad_cpu_engine`` asks for (``auto``: native when installed, else Treelite)."""
    native = _native_cpu_loader(source, params)
    if params.cpu_engine == "native" and native is None:
        library = _NATIVE_LIBRARY.get(source.format)
        raise NaiadError(
            f"model '{source.model_name}': naiad_cpu_engine 'native' needs "
            + (f"the {library} package (pip install 'naiad-fil[cpu]')" if library else "an XGBoost or LightGBM file")
            + f" for {source.description}; use 'auto' or 'treelite'",
            ErrorCode.INVALID_ARG,
        )
    if native is not None and params.cpu_engine != "treelite":
        try:
            return native()
        except LoadError as error:
            # Only a legacy binary file gets a second chance: XGBoost >= 3 cannot read it, Treelite can.
            if params.cpu_engine == "native" or source.format != "xgboost":
                raise _load_failure(source, error) from error
            _log.debug(
                "model '%s': xgboost cannot read %s (%s); trying Treelite", source.model_name, source.path, error
            )
    from naiad_fil.engines.treelite_gtil import TreeliteEngine

    try:
        return TreeliteEngine(
            source, nthread=params.cpu_nthread, allow_unknown_field=params.xgboost_allow_unknown_field
        )
    except LoadError as error:
        raise _load_failure(source, error) from error


def load_gpu_engine(source: ModelSource, params: FilParameters, device_id: int, facts: ModelFacts) -> Engine:
    """An engine on CUDA device ``device_id``: XGBoost's CUDA predictor, else nvForest."""
    from naiad_fil.engines import nvforest_gpu, xgboost_native

    if source.format.startswith("xgboost") and xgboost_native.cuda_build():
        try:
            return xgboost_native.XGBoostEngine(source, nthread=params.cpu_nthread, device=f"cuda:{device_id}")
        except LoadError as error:
            if source.format != "xgboost" or not nvforest_gpu.available():
                raise _load_failure(source, error) from error
            _log.debug(
                "model '%s': xgboost cannot read %s (%s); trying nvForest", source.model_name, source.path, error
            )
    if nvforest_gpu.available():
        try:
            return nvforest_gpu.NvForestEngine(
                source,
                device_id=device_id,
                layout=params.layout,
                chunk_size=params.chunk_size,
                num_outputs=facts.num_outputs,
                allow_unknown_field=params.xgboost_allow_unknown_field,
            )
        except LoadError as error:
            raise _load_failure(source, error) from error
    need = (
        "the CUDA build of xgboost (pip install 'naiad-fil[gpu]') or nvforest"
        if source.format.startswith("xgboost")
        else "nvforest (RAPIDS)"
    )
    raise NaiadError(
        f"model '{source.model_name}': a KIND_GPU instance of {source.description} needs {need}, which is not"
        " installed; install it, or use instance_group [{ kind: KIND_CPU }]",
        ErrorCode.UNAVAILABLE,
    )


def _native_cpu_loader(source: ModelSource, params: FilParameters) -> Callable[[], Engine] | None:
    library = _NATIVE_LIBRARY.get(source.format)
    if library is None or importlib.util.find_spec(library) is None:
        return None
    if library == "xgboost":
        from naiad_fil.engines.xgboost_native import XGBoostEngine

        return lambda: XGBoostEngine(source, nthread=params.cpu_nthread)
    from naiad_fil.engines.lightgbm_native import LightGBMEngine

    return lambda: LightGBMEngine(source, nthread=params.cpu_nthread)


def _load_failure(source: ModelSource, error: LoadError) -> NaiadError:
    return NaiadError(
        f"model '{source.model_name}': cannot load {source.description}: {error}."
        f" Check that the file is complete and that model_type names its format",
        ErrorCode.INVALID_ARG,
    )
