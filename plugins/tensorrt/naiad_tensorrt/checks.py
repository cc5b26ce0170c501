"""Checking a (completed) config against the TensorRT engine, on every load.

Every input of the engine must be in the config (TensorRT binds all of them), every configured
tensor must be the engine's, with the engine's datatype; each configured dimension must equal the
engine's, or fall in some used profile's range where the engine's dimension is dynamic.
``max_batch_size`` must fit the profiles the instances use.
Messages name the model, the tensor and both shapes, and say what to change.
"""

from __future__ import annotations

from collections.abc import Sequence

from naiad.backend import DataType, ModelConfig, ModelInput, ModelOutput, SuggestingError, close_matches
from naiad_tensorrt.autocomplete import supported_max_batch_size
from naiad_tensorrt.description import EngineDescription, EngineTensor, shape_text
from naiad_tensorrt.profiles import used_profiles


def check_config(config: ModelConfig, engine: EngineDescription, model_file: str) -> None:
    """INVALID_ARG when ``config`` does not describe the engine in ``model_file``."""
    _Checker(config, engine, model_file).run()


class _Checker:
    def __init__(self, config: ModelConfig, engine: EngineDescription, model_file: str) -> None:
        self.config = config
        self.engine = engine
        self.model_file = model_file
        self.profiles = used_profiles(config, len(engine.profiles))
        self.batching = config.max_batch_size > 0

    def fail(self, message: str, *, name: str = "", suggestions: Sequence[str] = ()) -> SuggestingError:
        """The refusal; ``name`` and ``suggestions`` for a tensor the engine lacks and those it may mean."""
        return SuggestingError(
            f"unable to load model '{self.config.name}': {message} (model file '{self.model_file}')",
            name=name,
            suggestions=suggestions,
        )

    def run(self) -> None:
        if self.engine.implicit_batch:
            raise self.fail(
                "the plan was built with an implicit batch dimension, which TensorRT 10 no longer runs; rebuild it"
                " with explicit dimensions (naiad-tensorrt build, or trtexec from ONNX)"
            )
        for tensor in self.engine.tensors:
            if tensor.is_shape_tensor or not tensor.linear_format:
                what = "a shape tensor" if tensor.is_shape_tensor else "a non-linear format tensor"
                raise self.fail(
                    f"engine tensor '{tensor.name}' is {what}, which naiad's tensorrt backend does not serve"
                )
        supported = supported_max_batch_size(self.engine, self.profiles)
        if self.config.max_batch_size > supported:
            raise self.fail(
                f"configuration specified max_batch_size {self.config.max_batch_size} but the TensorRT engine's"
                f" optimization profile(s) {self.profiles} only support a batch of {supported}; lower max_batch_size"
                " or rebuild the plan with a larger maximum shape"
            )
        self.listed(self.config.input, self.engine.inputs, "input")
        self.listed(self.config.output, self.engine.outputs, "output")
        states = {state.input_name for state in self.config.sequence_batching.state}
        controls = {control.name for control in self.config.sequence_batching.control_input}
        for tensor in self.engine.inputs:
            configured = any(item.name == tensor.name for item in self.config.input)
            if not configured and tensor.name not in states | controls:
                raise self.fail(
                    f"the engine's input '{tensor.name}' is not in the configuration; add it to 'input' (TensorRT"
                    " needs every input bound)"
                )

    def listed(self, items: Sequence[ModelInput | ModelOutput], tensors: Sequence[EngineTensor], kind: str) -> None:
        for item in items:
            tensor = next((t for t in tensors if t.name == item.name), None)
            if tensor is None:
                names = [t.name for t in tensors]
                raise self.fail(
                    f"unexpected inference {kind} '{item.name}', allowed {kind}s are: {', '.join(names)}",
                    name=item.name,
                    suggestions=close_matches(item.name, names),
                )
            configured = DataType.Name(item.data_type)
            if configured != tensor.config_type:
                raise self.fail(
                    f"configuration expects datatype {configured} for {kind} '{item.name}', model provides"
                    f" {tensor.config_type}"
                )
            dims = list(item.reshape.shape if item.HasField("reshape") else item.dims)
            self.dims(kind, tensor, dims)

    def dims(self, kind: str, tensor: EngineTensor, dims: list[int]) -> None:
        full = [-1, *dims] if self.batching else dims
        engine_shape = list(tensor.shape)
        # A static engine whose first dimension is 1 serves batches of one (Triton completes max_batch_size 1).
        batch_dim_ok = bool(engine_shape) and (
            engine_shape[0] == -1 or engine_shape[0] == self.config.max_batch_size == 1
        )
        if self.batching and not batch_dim_ok:
            raise self.fail(
                f"{kind} '{tensor.name}': for the model to support batching the engine shape must start with a"
                f" dynamic dimension (-1), but the engine has {shape_text(engine_shape)}; set max_batch_size: 0"
            )
        matches = len(full) == len(engine_shape) and all(
            want == have or have == -1
            for want, have in zip(full[self.batching :], engine_shape[self.batching :], strict=True)
        )
        if not matches:
            raise self.fail(self._mismatch(kind, tensor, full))
        if not tensor.is_input:
            return
        ranges = [self.engine.profile_shape(profile, tensor.name) for profile in self.profiles]
        fits = any(
            all(want < 0 or allowed.min[i] <= want <= allowed.max[i] for i, want in enumerate(full))
            for allowed in ranges
        )
        if not fits:
            accepted = "; ".join(
                f"profile {profile}: {shape_text(allowed.min)} to {shape_text(allowed.max)}"
                for profile, allowed in zip(self.profiles, ranges, strict=True)
            )
            raise self.fail(
                f"input '{tensor.name}': configuration shape {shape_text(full)} is outside every optimization profile"
                f" the instances use ({accepted}); change dims or rebuild the plan with a profile that covers them"
            )

    def _mismatch(self, kind: str, tensor: EngineTensor, full: list[int]) -> str:
        if self.batching:
            config = (
                f"{shape_text(full)} (an initial batch dimension because max_batch_size > 0, followed by the"
                " configured dims)"
            )
        else:
            config = shape_text(full)
        return (
            f"{kind} '{tensor.name}': the engine's shape is {shape_text(tensor.shape)} but the model configuration"
            f" specifies {config}; make dims match the engine (-1 where the engine's dimension is dynamic)"
        )
