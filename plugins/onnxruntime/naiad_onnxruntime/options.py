"""Triton's onnxruntime settings: model-config parameters, graph level and ``--backend-config``.

Model-config ``parameters`` (``string_value``), as Triton's onnxruntime backend reads them:

==========================================  ========================================================
``intra_op_thread_count``                   ``SessionOptions.intra_op_num_threads`` (0: ORT picks)
``inter_op_thread_count``                   ``SessionOptions.inter_op_num_threads`` (0: ORT picks)
``execution_mode``                          0 sequential (default), 1 parallel
``enable_mem_arena``                        ``SessionOptions.enable_cpu_mem_arena``
``enable_mem_pattern``                      ``SessionOptions.enable_mem_pattern``
``session.use_device_allocator_for_…``      session config entry of the same name
``memory.enable_memory_arena_shrinkage``    run config entry of the same name (e.g. ``cpu:0``)
``share_session_between_instances``         one session per instance group instead of per instance
``cudnn_conv_algo_search`` …                deprecated CUDA EP options (see :mod:`.providers`)
==========================================  ========================================================

``optimization { graph { level } }``: -1 basic, 1 extended, 2 disabled, anything else (0, unset)
all optimizations. ``model_operations { op_library_filename }`` registers custom-op libraries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from naiad.backend import ErrorCode, ModelConfig, NaiadError

_log = logging.getLogger("naiad.onnxruntime")

# optimization.graph.level -> onnxruntime.GraphOptimizationLevel member name (Triton's mapping).
GRAPH_LEVELS = {-1: "ORT_ENABLE_BASIC", 1: "ORT_ENABLE_EXTENDED", 2: "ORT_DISABLE_ALL"}
GRAPH_LEVEL_DEFAULT = "ORT_ENABLE_ALL"

DEVICE_ALLOCATOR_KEY = "session.use_device_allocator_for_initializers"
ARENA_SHRINKAGE_KEY = "memory.enable_memory_arena_shrinkage"
# Deprecated model-level CUDA EP settings Triton still reads (gpu_execution_accelerator "cuda" replaces them).
CUDA_PARAMETERS = ("cudnn_conv_algo_search", "gpu_mem_limit", "arena_extend_strategy", "do_copy_in_default_stream")

_TRUE = frozenset({"true", "on", "1"})
_FALSE = frozenset({"false", "off", "0"})


def parse_bool(value: str, what: str) -> bool:
    """Triton's boolean spellings: true/false, on/off, 1/0 (any case)."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise NaiadError(f"{what} must be true or false (or 1/0, on/off), got '{value}'", ErrorCode.INVALID_ARG)


def parse_int(value: str, what: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise NaiadError(f"{what} must be an integer, got '{value}'", ErrorCode.INVALID_ARG) from None


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Everything about a model's sessions that comes from its config, checked once at load."""

    graph_level: str = GRAPH_LEVEL_DEFAULT
    parallel: bool = False
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    mem_arena: bool | None = None
    mem_pattern: bool | None = None
    device_allocator_for_initializers: str | None = None
    arena_shrinkage: str | None = None
    share_session: bool = False
    global_thread_pool: bool = False
    op_libraries: tuple[str, ...] = ()
    cuda_parameters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: ModelConfig, *, global_thread_pool: bool = False) -> SessionSettings:
        """Read and check the settings of ``config``; INVALID_ARG naming the field when one is bad.

        ``global_thread_pool``: sessions share ONNX Runtime's global thread pools (see
        :func:`ensure_global_thread_pool`), so the per-model thread counts do not apply.
        """
        name = config.name
        params = {key: value.string_value for key, value in config.parameters.items()}

        def integer(key: str) -> int:
            return parse_int(params[key], f"model '{name}': parameter '{key}'") if key in params else 0

        def boolean(key: str) -> bool | None:
            return parse_bool(params[key], f"model '{name}': parameter '{key}'") if key in params else None

        execution_mode = integer("execution_mode")
        if execution_mode not in (0, 1):
            raise NaiadError(
                f"model '{name}': invalid configuration value provided. Expected values for execution_mode"
                f" are 0 (sequential) or 1 (parallel) but got {execution_mode}.",
                ErrorCode.INVALID_ARG,
            )
        level = config.optimization.graph.level if config.optimization.HasField("graph") else 0
        for key in ("enable_mem_arena", "enable_mem_pattern", ARENA_SHRINKAGE_KEY):
            if key in params:  # Triton's verbose lines, which its QA looks for
                _log.debug("Configuring %s to %s", key, params[key])
        return cls(
            graph_level=GRAPH_LEVELS.get(level, GRAPH_LEVEL_DEFAULT),
            parallel=execution_mode == 1,
            intra_op_threads=integer("intra_op_thread_count"),
            inter_op_threads=integer("inter_op_thread_count"),
            mem_arena=boolean("enable_mem_arena"),
            mem_pattern=boolean("enable_mem_pattern"),
            device_allocator_for_initializers=params.get(DEVICE_ALLOCATOR_KEY),
            arena_shrinkage=params.get(ARENA_SHRINKAGE_KEY),
            share_session=bool(boolean("share_session_between_instances")),
            global_thread_pool=global_thread_pool,
            op_libraries=tuple(config.model_operations.op_library_filename),
            cuda_parameters={key: params[key] for key in CUDA_PARAMETERS if key in params},
        )

    def session_options(self, ort: Any) -> Any:
        """A fresh ``onnxruntime.SessionOptions`` with these settings."""
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, self.graph_level)
        options.execution_mode = ort.ExecutionMode.ORT_PARALLEL if self.parallel else ort.ExecutionMode.ORT_SEQUENTIAL
        if self.global_thread_pool:
            options.use_per_session_threads = False
        else:
            if self.intra_op_threads > 0:
                options.intra_op_num_threads = self.intra_op_threads
            if self.inter_op_threads > 0:
                options.inter_op_num_threads = self.inter_op_threads
        if self.mem_arena is not None:
            options.enable_cpu_mem_arena = self.mem_arena
        if self.mem_pattern is not None:
            options.enable_mem_pattern = self.mem_pattern
        if self.device_allocator_for_initializers is not None:
            options.add_session_config_entry(DEVICE_ALLOCATOR_KEY, self.device_allocator_for_initializers)
        for library in self.op_libraries:
            options.register_custom_ops_library(library)
        return options

    def run_options(self, ort: Any) -> Any:
        """``onnxruntime.RunOptions`` for every run, or None when the defaults do."""
        if self.arena_shrinkage is None:
            return None
        options = ort.RunOptions()
        options.add_run_config_entry(ARENA_SHRINKAGE_KEY, self.arena_shrinkage)
        return options


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """``--backend-config=onnxruntime,<key>=<value>`` settings, server-wide (naiad itself reads
    ``default-max-batch-size``: :attr:`naiad.backend.ModelLoadContext.default_max_batch_size`)."""

    global_thread_pool: bool = False
    global_intra_op_threads: int = 0
    global_inter_op_threads: int = 0

    @classmethod
    def from_backend_config(cls, values: Mapping[str, str]) -> BackendSettings:
        def where(key: str) -> str:
            return f"--backend-config=onnxruntime,{key}"

        def integer(key: str, default: int) -> int:
            return parse_int(values[key], where(key)) if key in values else default

        enabled = "enable-global-threadpool" in values and parse_bool(
            values["enable-global-threadpool"], where("enable-global-threadpool")
        )
        return cls(
            global_thread_pool=enabled,
            global_intra_op_threads=integer("intra_op_thread_count", 0),
            global_inter_op_threads=integer("inter_op_thread_count", 0),
        )


_global_pool_lock = threading.Lock()
_global_pool: bool | None = None  # None: not tried yet; then whether the global pools exist


def ensure_global_thread_pool(ort: Any, settings: BackendSettings) -> bool:
    """Create ONNX Runtime's process-wide thread pools once, before the first session (Triton's
    ``enable-global-threadpool``); True when sessions should use them (``use_per_session_threads =
    False``). False when not asked for, or when ONNX Runtime was already in use in this process
    (another model imported it first), in which case sessions keep their own pools.
    """
    global _global_pool
    if not settings.global_thread_pool:
        return False
    with _global_pool_lock:
        if _global_pool is None:
            sizes = (settings.global_intra_op_threads, settings.global_inter_op_threads)
            try:
                ort.set_global_thread_pool_sizes(*sizes)
            except Exception as error:
                _log.warning(
                    "enable-global-threadpool: ONNX Runtime was already initialised in this process, so"
                    " every session keeps its own thread pools (%s)",
                    error,
                )
                _global_pool = False
            else:
                _log.info("ONNX Runtime global thread pools: intra-op %d, inter-op %d (0: ORT's default)", *sizes)
                _global_pool = True
        return _global_pool
