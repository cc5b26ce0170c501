"""Which ONNX Runtime execution providers (EPs) an instance runs on, chosen the way Triton chooses.

* ``KIND_GPU`` instances: the ``gpu_execution_accelerator`` list first (``tensorrt`` →
  TensorRT EP, ``cuda`` → options for the CUDA EP), then the CUDA EP on the instance's device;
* every instance: the ``cpu_execution_accelerator`` list (``openvino`` → OpenVINO EP), then the
  CPU EP, which runs whatever the others do not take.

Triton fails a load that names an accelerator its build lacks; so does naiad, and it names the
EP and the pip package that brings it. ONNX Runtime itself only warns and falls back to the CPU
when a provider cannot start, so :func:`check_enabled` compares the session's providers with the
plan afterwards.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from naiad.backend import ErrorCode, ModelConfig, NaiadError
from naiad_onnxruntime.options import parse_bool, parse_int

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
OPENVINO = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"

# What brings each EP, for the error that says it is missing.
INSTALL_HINTS = {
    TENSORRT: "onnxruntime-gpu with TensorRT's libraries: pip install 'naiad-onnxruntime[gpu]' tensorrt",
    CUDA: "onnxruntime-gpu: pip install 'naiad-onnxruntime[gpu]'",
    OPENVINO: "onnxruntime-openvino: pip install onnxruntime-openvino",
}
# Wheels that all install the `onnxruntime` import package; only one may be installed at a time.
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml")

_GPU_ACCELERATORS = "optimization.execution_accelerators.gpu_execution_accelerator"
_CPU_ACCELERATORS = "optimization.execution_accelerators.cpu_execution_accelerator"

# Triton's TensorRT accelerator parameters -> TensorRT EP option, and how each value is checked.
_TRT_INT = "int"
_TRT_BOOL = "bool"
_TRT_STR = "str"
_TRT_PARAMETERS: dict[str, tuple[str, str]] = {
    "max_workspace_size_bytes": ("trt_max_workspace_size", _TRT_INT),
    **{
        key: (key, kind)
        for key, kind in (
            ("trt_max_partition_iterations", _TRT_INT),
            ("trt_min_subgraph_size", _TRT_INT),
            ("trt_dla_enable", _TRT_BOOL),
            ("trt_dla_core", _TRT_INT),
            ("trt_engine_cache_enable", _TRT_BOOL),
            ("trt_engine_cache_path", _TRT_STR),
            ("trt_engine_cache_prefix", _TRT_STR),
            ("trt_dump_subgraphs", _TRT_BOOL),
            ("trt_force_sequential_engine_build", _TRT_BOOL),
            ("trt_context_memory_sharing_enable", _TRT_BOOL),
            ("trt_layer_norm_fp32_fallback", _TRT_BOOL),
            ("trt_timing_cache_enable", _TRT_BOOL),
            ("trt_timing_cache_path", _TRT_STR),
            ("trt_force_timing_cache", _TRT_BOOL),
            ("trt_detailed_build_log", _TRT_BOOL),
            ("trt_build_heuristics_enable", _TRT_BOOL),
            ("trt_sparsity_enable", _TRT_BOOL),
            ("trt_builder_optimization_level", _TRT_INT),
            ("trt_auxiliary_streams", _TRT_INT),
            ("trt_tactic_sources", _TRT_STR),
            ("trt_extra_plugin_lib_paths", _TRT_STR),
            ("trt_profile_min_shapes", _TRT_STR),
            ("trt_profile_max_shapes", _TRT_STR),
            ("trt_profile_opt_shapes", _TRT_STR),
            ("trt_cuda_graph_enable", _TRT_BOOL),
            ("trt_dump_ep_context_model", _TRT_BOOL),
            ("trt_ep_context_file_path", _TRT_STR),
            ("trt_ep_context_embed_mode", _TRT_INT),
        )
    },
    "int8_calibration_table_name": ("trt_int8_calibration_table_name", _TRT_STR),
    "int8_use_native_calibration_table": ("trt_int8_use_native_calibration_table", _TRT_BOOL),
}
_TRT_PRECISIONS = {"FP32": None, "FP16": "trt_fp16_enable", "BF16": "trt_bf16_enable", "INT8": "trt_int8_enable"}
# Deprecated model-level CUDA parameters whose values Triton translates.
_CUDNN_SEARCH = {"0": "EXHAUSTIVE", "1": "HEURISTIC", "2": "DEFAULT"}
_ARENA_STRATEGY = {"0": "kNextPowerOfTwo", "1": "kSameAsRequested"}


@dataclass(frozen=True, slots=True)
class Provider:
    """One EP with its options and the config setting that asked for it (for error messages)."""

    name: str
    options: Mapping[str, str] = field(default_factory=dict)
    requested_by: str = ""


def plan(config: ModelConfig, kind: str, device_id: int, cuda_parameters: Mapping[str, str]) -> list[Provider]:
    """The EPs, in priority order, for an instance of ``kind`` (``CPU``/``GPU``/``MODEL``) on ``device_id``."""
    accelerators = config.optimization.execution_accelerators
    providers: list[Provider] = []
    if kind == "GPU":
        cuda_options = _deprecated_cuda_options(config.name, cuda_parameters)
        for accelerator in accelerators.gpu_execution_accelerator:
            params = dict(accelerator.parameters)
            where = f"{_GPU_ACCELERATORS} '{accelerator.name}'"
            if accelerator.name == "tensorrt":
                options = _tensorrt_options(config.name, params)
                options["device_id"] = str(device_id)
                providers.append(Provider(TENSORRT, options, where))
            elif accelerator.name == "cuda":
                for key, value in params.items():
                    if key in ("do_copy_in_default_stream", "use_ep_level_unified_stream"):
                        parse_bool(value, f"model '{config.name}': {where} parameter '{key}'")
                    cuda_options[key] = value
            else:
                raise _unknown_accelerator(config.name, accelerator.name, _GPU_ACCELERATORS)
        cuda_options["device_id"] = str(device_id)
        providers.append(Provider(CUDA, cuda_options, "instance_group kind KIND_GPU"))
    for accelerator in accelerators.cpu_execution_accelerator:
        if accelerator.name != "openvino":
            raise _unknown_accelerator(config.name, accelerator.name, _CPU_ACCELERATORS)
        providers.append(Provider(OPENVINO, {"device_type": "CPU"}, f"{_CPU_ACCELERATORS} 'openvino'"))
    providers.append(Provider(CPU))
    return providers


def _unknown_accelerator(model: str, name: str, where: str) -> NaiadError:
    known = "'tensorrt' or 'cuda'" if where == _GPU_ACCELERATORS else "'openvino'"
    return NaiadError(
        f"model '{model}': unknown Execution Accelerator '{name}' is requested in {where};"
        f" the onnxruntime backend knows {known}",
        ErrorCode.INVALID_ARG,
    )


def _tensorrt_options(model: str, params: Mapping[str, str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in params.items():
        what = f"model '{model}': TensorRT Execution Accelerator parameter '{key}'"
        if key == "precision_mode":
            if value not in _TRT_PRECISIONS:
                raise NaiadError(
                    f"model '{model}': unsupported precision mode '{value}' is requested for the TensorRT"
                    " Execution Accelerator (FP32, FP16, BF16 or INT8)",
                    ErrorCode.INVALID_ARG,
                )
            option = _TRT_PRECISIONS[value]
            if option is not None:
                options[option] = "1"
            continue
        if key not in _TRT_PARAMETERS:
            raise NaiadError(
                f"model '{model}': unknown parameter '{key}' is provided for TensorRT Execution Accelerator",
                ErrorCode.INVALID_ARG,
            )
        option, kind = _TRT_PARAMETERS[key]
        if kind == _TRT_INT:
            parse_int(value, what)
        elif kind == _TRT_BOOL:
            parse_bool(value, what)
        if value:
            options[option] = value
    return options


def _deprecated_cuda_options(model: str, params: Mapping[str, str]) -> dict[str, str]:
    """CUDA EP options from the model-level parameters Triton still honours."""
    options: dict[str, str] = {}
    for key, table in (("cudnn_conv_algo_search", _CUDNN_SEARCH), ("arena_extend_strategy", _ARENA_STRATEGY)):
        if key in params:
            value = params[key].strip()
            if value not in table:
                raise NaiadError(
                    f"model '{model}': unsupported {key} value '{value}' is requested ({', '.join(table)})",
                    ErrorCode.INVALID_ARG,
                )
            options[key] = table[value]
    for key in ("gpu_mem_limit", "do_copy_in_default_stream"):
        if key in params:
            options[key] = params[key]
    return options


def check_available(providers: Sequence[Provider], available: Sequence[str], model: str, instance: str) -> None:
    """UNAVAILABLE naming the EP, the setting that asked for it and the package to install, if missing."""
    for provider in providers:
        if provider.name in available:
            continue
        installed = installed_distributions()
        found = ", ".join(f"{name} {version}" for name, version in installed.items()) or "none"
        message = (
            f"model '{model}' instance '{instance}': {provider.requested_by} needs ONNX Runtime's"
            f" {provider.name}, which the installed ONNX Runtime does not provide (installed: {found};"
            f" its providers: {', '.join(available)}). Install {INSTALL_HINTS.get(provider.name, provider.name)}"
        )
        if provider.name != CPU:
            message += (
                "; the ONNX Runtime wheels conflict, so uninstall the others first"
                " (see the naiad-onnxruntime README, 'GPU and other execution providers')"
            )
        raise NaiadError(message, ErrorCode.UNAVAILABLE)


def check_enabled(providers: Sequence[Provider], enabled: Sequence[str], model: str, instance: str) -> None:
    """UNAVAILABLE when ONNX Runtime silently dropped a planned EP while creating the session."""
    missing = [provider.name for provider in providers if provider.name not in enabled]
    if missing:
        raise NaiadError(
            f"model '{model}' instance '{instance}': ONNX Runtime could not enable {', '.join(missing)}"
            f" (session runs on {', '.join(enabled)}); its warnings in the server log say why, usually"
            " missing CUDA, cuDNN or TensorRT libraries or an invalid device id",
            ErrorCode.UNAVAILABLE,
        )


def installed_distributions() -> dict[str, str]:
    """The ONNX Runtime wheels installed, name -> version (more than one means they overwrite each other)."""
    found: dict[str, str] = {}
    for name in ORT_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found
