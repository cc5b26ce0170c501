"""Checks on a normalised model config (model-config.md §9).

:func:`validate_config` collects every problem it finds and raises one
INVALID_ARG :class:`~naiad.errors.NaiadError` naming the model, each field, what
is wrong and what would be valid. Checks that need other models (ensemble
steps against composing models) belong to the loader.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from naiad.backend_info import DEFAULT_BACKENDS, BackendTable
from naiad.config.repository_agents import AGENTS as REPOSITORY_AGENTS
from naiad.errors import ErrorCode, NaiadError
from naiad.protocol.model_config_pb2 import (
    BatchInput,
    DataType,
    ModelConfig,
    ModelDynamicBatching,
    ModelInput,
    ModelInstanceGroup,
    ModelOutput,
    ModelSequenceBatching,
    ModelTensorReshape,
)

__all__ = ["ConfigInvalid", "validate_config"]

ENSEMBLE = "ensemble"

_CONTROL = ModelSequenceBatching.Control
_CORRID_TYPES = (
    DataType.TYPE_UINT64,
    DataType.TYPE_INT64,
    DataType.TYPE_UINT32,
    DataType.TYPE_INT32,
    DataType.TYPE_STRING,
)
_PAIRS = ("int32_false_true", "fp32_false_true", "bool_false_true")


class ConfigInvalid(NaiadError):
    """INVALID_ARG for a config that breaks rules of model-config.md §9; ``problems`` lists each one."""

    def __init__(self, model_name: str, problems: Sequence[str]) -> None:
        if len(problems) == 1:
            message = f"model '{model_name}': {problems[0]}"
        else:
            message = f"model '{model_name}' has {len(problems)} config errors: {'; '.join(problems)}"
        super().__init__(message, ErrorCode.INVALID_ARG)
        self.problems = tuple(problems)


def validate_config(
    config: ModelConfig,
    *,
    gpu_count: int = 0,
    model_dir_name: str | None = None,
    backends: BackendTable = DEFAULT_BACKENDS,
) -> None:
    """Raise :class:`ConfigInvalid` listing every rule of model-config.md §9 that *config* breaks.

    Run it after :func:`~naiad.config.detect_backend` and
    :func:`~naiad.config.fill_defaults`. *gpu_count* is the number of usable
    GPUs; *model_dir_name*, when given, must equal ``config.name``; *backends*
    says which platforms and features each backend takes.
    """
    checker = _Checker(config, gpu_count, backends)
    checker.run(model_dir_name)
    if checker.problems:
        raise ConfigInvalid(config.name or model_dir_name or "<unnamed>", checker.problems)


def decoupled_cache_problem(config: ModelConfig) -> str | None:
    """Triton's words for a config that enables the response cache of a decoupled model, if it does.

    An ensemble is checked on its config as written, before its steps decide whether it is decoupled.
    """
    if config.response_cache.enable and config.model_transaction_policy.decoupled:
        return (
            f"Response Cache does not currently support model {config.name} with 'decoupled' transaction policy. "
            "Please disable the response cache."
        )
    return None


def _fmt(values: Iterable[object]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _type_name(value: int) -> str:
    return DataType.Name(value) if value in DataType.values() else str(value)


class _Checker:
    def __init__(self, config: ModelConfig, gpu_count: int, backends: BackendTable) -> None:
        self.config = config
        self.gpu_count = max(gpu_count, 0)
        self.problems: list[str] = []
        self.is_ensemble = config.platform == ENSEMBLE
        self.backends = backends
        self.info = backends.get(config.backend or backends.backend_of_platform(config.platform) or "")
        self.capabilities = self.info.capabilities

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def run(self, model_dir_name: str | None) -> None:
        config = self.config
        if not config.name:
            self.fail("'name' is empty; set it to the model directory name")
        elif model_dir_name is not None and config.name != model_dir_name:
            self.fail(
                f"name '{config.name}' differs from the directory name '{model_dir_name}';"
                " the directory name must equal the model name"
            )
        self.backend_and_platform()
        if config.max_batch_size < 0:
            self.fail(f"max_batch_size {config.max_batch_size} is negative; use 0 (no batching) or more")
        for index, model_input in enumerate(config.input):
            self.tensor("input", index, model_input)
        for index, model_output in enumerate(config.output):
            self.tensor("output", index, model_output)
        self.unique_names("input", [t.name for t in config.input])
        self.unique_names("output", [t.name for t in config.output])
        self.batch_io()
        choice = config.WhichOneof("scheduling_choice")
        if choice == "dynamic_batching":
            self.dynamic_batching(config.dynamic_batching)
        elif choice == "sequence_batching":
            self.sequence_batching(config.sequence_batching)
        cached_decoupled = decoupled_cache_problem(config)
        if cached_decoupled:
            self.fail(cached_decoupled)
        if not self.is_ensemble:
            for index, group in enumerate(config.instance_group):
                self.instance_group(index, group)
        self.model_metrics()
        for agent in config.model_repository_agents.agents:  # Triton fails a model whose agent it lacks
            if agent.name not in REPOSITORY_AGENTS:
                self.fail(
                    f"model_repository_agents: naiad runs only the 'checksum' repository agent, and agent "
                    f"'{agent.name}' would not run; remove it (check or decrypt the model files before they reach "
                    "the repository)"
                )

    # -- platform / backend ---------------------------------------------------------------------

    def backend_and_platform(self) -> None:
        config = self.config
        platform, backend = config.platform, config.backend
        if self.is_ensemble:
            if backend:
                self.fail(f"backend '{backend}' must be empty for platform 'ensemble'")
            if not config.HasField("ensemble_scheduling"):
                self.fail(f"must specify 'step' for ensemble '{config.name}'")
            if config.instance_group:
                self.fail(f"instance group should not be specified for ensemble '{config.name}'")
            if config.HasField("optimization"):
                self.fail(f"optimization should not be specified for ensemble '{config.name}'")
            if config.model_warmup:
                self.fail(f"model_warmup can not be specified for ensemble '{config.name}'")
            return
        if config.HasField("ensemble_scheduling"):
            self.fail(f"ensemble scheduling cannot be set for model '{config.name}' whose platform is not ensemble")
        if not backend:
            if platform:
                self.fail(f"'backend' is empty for platform '{platform}'; set backend explicitly")
            else:
                self.fail("must specify 'platform' or 'backend' (e.g. backend: \"python\")")
            return
        info = self.info
        allowed = (info.platforms | ({""} if not info.platform_required else set())) if info.checks_platform else None
        expected = self.backends.backend_of_platform(platform) if platform else None
        if allowed is not None and platform not in allowed:
            valid = " or ".join(repr(p) for p in sorted(allowed) if p) + (" (or none)" if "" in allowed else "")
            self.fail(
                f"unexpected 'platform' and 'backend' pair: platform '{platform}', backend '{backend}';"
                f" backend '{backend}' takes platform {valid}"
            )
        elif expected is not None and expected != backend:
            self.fail(
                f"unexpected 'platform' and 'backend' pair: platform '{platform}', backend '{backend}';"
                f" platform '{platform}' needs backend '{expected}'"
            )

    # -- inputs / outputs -----------------------------------------------------------------------

    def tensor(self, kind: str, index: int, tensor: ModelInput | ModelOutput) -> None:
        where = f"{kind}[{index}]" + (f" '{tensor.name}'" if tensor.name else "")
        if not tensor.name:
            self.fail(f"{where}: 'name' is empty")
        if tensor.data_type == DataType.TYPE_INVALID:
            self.fail(f"{where}: 'data_type' is not set (e.g. data_type: TYPE_FP32)")
        elif tensor.data_type not in DataType.values():  # a number in the pbtxt that names no type
            self.fail(f"{where}: data_type {tensor.data_type} is not a datatype; use a name such as TYPE_FP32")
        if not tensor.dims:
            self.fail(
                f"{where}: 'dims' is empty; give the shape (without the batch dimension when"
                " max_batch_size > 0), e.g. dims: [ 1 ] with reshape: { shape: [ ] } for a scalar"
            )
        bad = [d for d in tensor.dims if d < 1 and d != -1]
        if bad:
            self.fail(f"{where}: dims {_fmt(tensor.dims)}: each dimension must be >= 1, or -1 for a variable size")
        if tensor.HasField("reshape"):
            self.reshape(where, tensor.dims, tensor.reshape)
        if isinstance(tensor, ModelInput) and tensor.format != ModelInput.FORMAT_NONE and len(tensor.dims) != 3:
            self.fail(
                f"{where}: format {ModelInput.Format.Name(tensor.format)} requires exactly 3 dims,"
                f" got {_fmt(tensor.dims)}"
            )
        if tensor.is_shape_tensor and not self.capabilities.shape_tensors:
            self.fail(f"{where}: is_shape_tensor is {self._unsupported('shape tensors')}")
        if tensor.is_non_linear_format_io and not self.capabilities.non_linear_io:
            self.fail(f"{where}: is_non_linear_format_io is {self._unsupported('non-linear I/O formats')}")
        elif tensor.is_non_linear_format_io and len(tensor.dims) != 3:
            self.fail(f"{where}: is_non_linear_format_io requires exactly 3 dims, got {_fmt(tensor.dims)}")

    def unique_names(self, kind: str, names: Sequence[str]) -> None:
        """A name given twice: no request could name both (Triton loads such a model, then refuses every request)."""
        first: dict[str, int] = {}
        for index, name in enumerate(names):
            if name and name in first:
                self.fail(f"{kind}[{index}] '{name}': {kind}[{first[name]}] has the same name; rename one")
            first.setdefault(name, index)

    def reshape(self, where: str, dims: Sequence[int], reshape: ModelTensorReshape) -> None:
        shape = list(reshape.shape)
        if not shape and self.config.max_batch_size == 0:
            self.fail(
                f"{where}: an empty reshape (scalar) needs a batching model (max_batch_size > 0);"
                " scalar tensors are not supported otherwise"
            )
            return
        if any(d < 1 and d != -1 for d in shape):
            self.fail(f"{where}: reshape {_fmt(shape)}: each dimension must be >= 1, or -1")
            return
        if _segments(dims) != _segments(shape):
            self.fail(
                f"{where}: reshape {_fmt(shape)} has a different number of elements than dims"
                f" {_fmt(dims)} (variable -1 dimensions must line up between them)"
            )

    def batch_io(self) -> None:
        inputs = {t.name for t in self.config.input}
        outputs = {t.name for t in self.config.output}
        for index, batch_input in enumerate(self.config.batch_input):
            where = f"batch_input[{index}]"
            if not batch_input.target_name:
                self.fail(f"{where}: 'target_name' is empty")
            if batch_input.data_type not in (DataType.TYPE_INT32, DataType.TYPE_FP32):
                self.fail(
                    f"{where}: data_type {_type_name(batch_input.data_type)} is not allowed;"
                    " use TYPE_INT32 or TYPE_FP32"
                )
            self.source_input(where, batch_input.source_input, inputs, BatchInput.Kind.Name(batch_input.kind))
        seen: set[str] = set()
        for index, batch_output in enumerate(self.config.batch_output):
            where = f"batch_output[{index}]"
            for target in batch_output.target_name:
                if target not in outputs:
                    self.fail(f"{where}: target_name '{target}' is not a model output ({_fmt(sorted(outputs))})")
                if target in seen:
                    self.fail(f"{where}: target_name '{target}' appears in more than one batch_output")
                seen.add(target)
            self.source_input(where, batch_output.source_input, inputs, "batch output")

    def source_input(self, where: str, sources: Sequence[str], inputs: set[str], what: str) -> None:
        if len(sources) != 1:
            self.fail(f"{where}: {what} needs exactly one source_input, got {len(sources)}")
        elif sources[0] not in inputs:
            self.fail(f"{where}: source_input '{sources[0]}' is not a model input ({_fmt(sorted(inputs))})")

    # -- schedulers -----------------------------------------------------------------------------

    def preferred_sizes(self, where: str, sizes: Sequence[int]) -> None:
        limit = self.config.max_batch_size
        for size in sizes:
            if not 1 <= size <= limit:
                valid = f"[1, {limit}] (max_batch_size)" if limit > 0 else "none: max_batch_size is 0"
                self.fail(f"{where}.preferred_batch_size {size} is out of range; valid: {valid}")

    def dynamic_batching(self, batching: ModelDynamicBatching) -> None:
        where = "dynamic_batching"
        self.preferred_sizes(where, batching.preferred_batch_size)
        levels = batching.priority_levels
        if levels > 0 and not 1 <= batching.default_priority_level <= levels:
            self.fail(
                f"{where}.default_priority_level {batching.default_priority_level} must be in"
                f" [1, {levels}] when priority_levels is {levels}"
            )
        for key in sorted(batching.priority_queue_policy):
            if not 1 <= key <= levels:
                valid = f"[1, {levels}]" if levels else "none: priority_levels is 0"
                self.fail(f"{where}.priority_queue_policy key {key} is not a priority level; valid: {valid}")
        # Triton 2.51 accepts preserve_ordering with a DELAY timeout action; so does naiad.
        if batching.preserve_ordering and levels > 1:
            self.fail(f"{where}: preserve_ordering allows only one priority level, not {levels}")

    def sequence_batching(self, batching: ModelSequenceBatching) -> None:
        where = "sequence_batching"
        seen: dict[int, str] = {}
        for index, control_input in enumerate(batching.control_input):
            input_where = f"{where}.control_input[{index}]"
            if not control_input.name:
                self.fail(f"{input_where}: 'name' is empty")
            else:
                input_where += f" '{control_input.name}'"
            if not control_input.control:
                self.fail(f"{input_where}: has no 'control'; give one, e.g. kind: CONTROL_SEQUENCE_START")
            for control in control_input.control:
                kind = _CONTROL.Kind.Name(control.kind) if control.kind in _CONTROL.Kind.values() else "?"
                if control.kind in seen:
                    self.fail(f"{input_where}: {kind} is already given by control input '{seen[control.kind]}'")
                seen[control.kind] = control_input.name
                self.control(input_where, kind, control)
        if batching.HasField("oldest"):
            self.preferred_sizes(f"{where}.oldest", batching.oldest.preferred_batch_size)
        if batching.HasField("direct"):
            utilization = batching.direct.minimum_slot_utilization
            if not 0.0 <= utilization <= 1.0:
                self.fail(f"{where}.direct.minimum_slot_utilization {utilization:g} must be in [0, 1]")
        for index, state in enumerate(batching.state):
            state_where = f"{where}.state[{index}]"
            if not state.input_name or not state.output_name:
                self.fail(f"{state_where}: both 'input_name' and 'output_name' are required")
            if state.data_type == DataType.TYPE_INVALID:
                self.fail(f"{state_where}: 'data_type' is not set")
            if any(d < 1 and d != -1 for d in state.dims):  # no dims at all is a scalar state, as in Triton
                self.fail(f"{state_where}: dims {_fmt(state.dims)}: give each dimension as >= 1 or -1")
        if self.config.response_cache.enable:
            self.fail(  # Triton's words
                f"Response Cache does not currently support model {self.config.name} with sequence batching "
                "scheduler. Please disable the response cache."
            )

    def control(self, where: str, kind: str, control: ModelSequenceBatching.Control) -> None:
        if control.kind == _CONTROL.CONTROL_SEQUENCE_CORRID:
            if control.data_type not in _CORRID_TYPES:
                valid = ", ".join(DataType.Name(t) for t in _CORRID_TYPES)
                self.fail(f"{where}: {kind} data_type {_type_name(control.data_type)} is not allowed; use {valid}")
            return
        given = [name for name in _PAIRS if len(getattr(control, name))]
        if len(given) != 1:
            found = f"got {' and '.join(given)}" if given else "none is set"
            self.fail(f"{where}: {kind} needs exactly one of {', '.join(_PAIRS)} ({found})")
        elif len(getattr(control, given[0])) != 2:
            self.fail(f"{where}: {kind} {given[0]} must have exactly 2 entries [false, true]")

    # -- instances and metrics ------------------------------------------------------------------

    def instance_group(self, index: int, group: ModelInstanceGroup) -> None:
        where = f"instance_group[{index}]" + (f" '{group.name}'" if group.name else "")
        kind = ModelInstanceGroup.Kind.Name(group.kind) if group.kind in ModelInstanceGroup.Kind.values() else "?"
        if group.count < 1:
            self.fail(f"{where}: count {group.count} must be >= 1")
        if group.kind == ModelInstanceGroup.KIND_GPU:
            if self.gpu_count == 0:
                self.fail(
                    f"{where}: kind KIND_GPU but no GPUs are available;"
                    " use kind: KIND_CPU (or KIND_AUTO) or run on a host with GPUs"
                )
            else:
                bad = [g for g in group.gpus if not 0 <= g < self.gpu_count]
                if bad:
                    self.fail(f"{where}: gpus {_fmt(bad)} do not exist; valid ids: 0..{self.gpu_count - 1}")
        elif group.kind in (ModelInstanceGroup.KIND_CPU, ModelInstanceGroup.KIND_MODEL) and group.gpus:
            self.fail(f"{where}: kind {kind} must not list gpus {_fmt(group.gpus)}; remove 'gpus' or use KIND_GPU")
        if group.profile and not self.capabilities.optimization_profiles:
            self.fail(f"{where}: 'profile' is {self._unsupported('optimization profiles')}")

    def _unsupported(self, feature: str) -> str:
        """Why a feature is refused: only backends that declare it take it (TensorRT among Triton's)."""
        return (
            f"only supported for TensorRT models (tensorrt_plan) and backends that declare {feature}; "
            f"backend '{self.config.backend}' does not"
        )

    def model_metrics(self) -> None:
        for index, control in enumerate(self.config.model_metrics.metric_control):
            where = f"model_metrics.metric_control[{index}]"
            if not control.metric_identifier.family:
                self.fail(f"{where}: metric_identifier.family is empty")
            if not control.histogram_options.buckets:
                self.fail(f"{where}: histogram_options.buckets is empty; give the bucket boundaries")


def _segments(shape: Sequence[int]) -> list[int]:
    """Element counts between variable (-1) dimensions: equal lists mean compatible shapes."""
    counts, current = [], 1
    for dim in shape:
        if dim == -1:
            counts.append(current)
            current = 1
        else:
            current *= dim
    counts.append(current)
    return counts
