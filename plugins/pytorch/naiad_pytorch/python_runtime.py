"""Triton's PyTorch python runtime (``runtime: "model.py"``): an eager ``nn.Module`` run through
``torch.compile``, or a TorchScript file, with positional inputs and outputs.

As in Triton's runtime, the model file is the first of ``default_model_filename``, ``model.py`` and
``model.pt`` found in the version folder. From a ``.py`` file, the first ``torch.nn.Module`` subclass
its module defines or imports (in ``dir()`` order) is built with no arguments, its ``state_dict`` is
loaded from the ``.pt`` file of the same name when there is one, and the module is moved to the
instance's device, put in ``eval()`` mode and wrapped in ``torch.compile(model,
**TORCH_COMPILE_OPTIONAL_PARAMETERS)`` (a JSON object). A TorchScript file is loaded with
``torch.jit.load`` and put in ``eval()`` mode. Each instance builds its own module. ``forward`` gets
the config inputs positionally, in config order, under inference mode; its result (a tensor, or a
tuple or list of them) gives the config outputs in order.

``NUM_THREADS`` and ``NUM_INTEROP_THREADS`` size torch's thread pools when given; they are
process-wide in naiad (Triton's runtime runs each model in a process of its own and sets both to 1
by default), so the first model that sets one wins, as for ``INTRA_OP_THREAD_COUNT``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy.typing as npt
import torch

from naiad.backend import (
    Arrays,
    BackendModel,
    DataType,
    ErrorCode,
    InstanceContext,
    ModelInput,
    ModelLoadContext,
    ModelOutput,
    NaiadError,
    TensorInstance,
    invalid_arg,
)
from naiad_pytorch import convert, settings
from naiad_pytorch.execution import summary
from naiad_pytorch.instance import device_for
from naiad_pytorch.parameters import parse_integer

_log = logging.getLogger("naiad.pytorch")

CANDIDATES = ("model.py", "model.pt")


class PythonRuntimeModel(BackendModel):
    """A model version served by the python runtime: its file, class and ``torch.compile`` settings."""

    def __init__(self, context: ModelLoadContext, model_file: Path, compile_options: dict[str, Any]) -> None:
        self.name = context.model_name
        self.model_file = model_file
        self.compile_options = compile_options
        self._lock = threading.Lock()
        self._class: type[torch.nn.Module] | None = None
        if model_file.suffix == ".py":
            self._class = _module_class(self.name, self._import(context))

    def _import(self, context: ModelLoadContext) -> ModuleType:
        name = f"naiad_pytorch_runtime.{self.name}.v{context.version}"
        spec = importlib.util.spec_from_file_location(name, self.model_file)
        if spec is None or spec.loader is None:
            raise NaiadError(f"model '{self.name}': cannot import '{self.model_file}'", ErrorCode.INVALID_ARG)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise NaiadError(
                f"model '{self.name}': importing '{self.model_file}' failed: {type(error).__name__}: {error}",
                ErrorCode.INVALID_ARG,
            ) from error
        return module

    def build(self, device: torch.device | None) -> Any:
        """A fresh module for one instance, on ``device`` (None: where its parameters are)."""
        if self._class is None:
            _log.info("Loading '%s' as TorchScript", self.name)
            scripted = torch.jit.load(str(self.model_file), map_location=device)  # type: ignore[no-untyped-call]
            scripted.eval()
            return scripted
        try:
            module = self._class()
        except Exception as error:
            raise NaiadError(
                f"model '{self.name}': {self._class.__name__}() failed: {type(error).__name__}: {error}",
                ErrorCode.INVALID_ARG,
            ) from error
        place = device if device is not None else _parameter_device(self.name, module)
        weights = self.model_file.with_suffix(".pt")
        if weights.is_file():
            try:
                module.load_state_dict(torch.load(weights, map_location=place))
            except Exception as error:
                raise NaiadError(
                    f"model '{self.name}': loading the parameters in '{weights}' into {self._class.__name__} "
                    f"failed: {type(error).__name__}: {error}",
                    ErrorCode.INVALID_ARG,
                ) from error
        else:
            _log.info("Model parameter file not found for '%s'", self.name)
        module.to(place)
        module.eval()
        with self._lock:  # dynamo's setup is not made for two threads at once
            return torch.compile(module, **self.compile_options)


class PythonRuntimeInstance(TensorInstance):
    """Runs one instance's module: config inputs in order in, config outputs in order out."""

    def __init__(self, model: PythonRuntimeModel, context: InstanceContext) -> None:
        super().__init__(context.config)
        self.device = device_for(context)
        self.module: Any = model.build(self.device)
        self.inputs = [(tensor.name, tensor.data_type) for tensor in context.config.input]
        self.outputs = [output.name for output in context.config.output]

    def run(self, inputs: Arrays) -> dict[str, npt.NDArray[Any]]:
        missing = [name for name, _ in self.inputs if name not in inputs]
        if missing:
            raise invalid_arg(
                f"model '{self.model_name}' takes every config input positionally; the request lacks {missing}"
            )
        with torch.inference_mode():
            tensors = [convert.to_tensor(inputs[name], data_type) for name, data_type in self.inputs]
            if self.device is not None and self.device.type != "cpu":
                tensors = [tensor.to(self.device) for tensor in tensors]
            try:
                result = self.module(*tensors)
            except Exception as error:
                _log.debug("model '%s': forward() failed", self.model_name, exc_info=error)
                raise NaiadError(f"PyTorch execute failure: {summary(error)}", ErrorCode.INTERNAL) from error
        items = list(result) if isinstance(result, tuple | list) else [result]
        if len(items) < len(self.outputs):
            raise NaiadError(
                f"model '{self.model_name}' returned {len(items)} result(s) for {len(self.outputs)} config outputs",
                ErrorCode.INTERNAL,
            )
        return {name: convert.to_array(item.detach()) for name, item in zip(self.outputs, items, strict=False)}

    def finalize(self) -> None:
        self.module = None


def load_model(context: ModelLoadContext) -> PythonRuntimeModel:
    """Find the model file, check the config and the ``torch.compile`` options, apply thread settings."""
    config = context.config
    tensors: list[ModelInput | ModelOutput] = [*config.input, *config.output]
    strings = [t.name for t in tensors if t.data_type == DataType.TYPE_STRING]
    if strings:
        raise invalid_arg(
            f"model '{context.model_name}': the PyTorch python runtime passes tensors only; {strings} are TYPE_STRING"
        )
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    options = _compile_options(context.model_name, parameters.get("TORCH_COMPILE_OPTIONAL_PARAMETERS"))
    _log.info("'torch.compile' optional parameter(s) for '%s': %s", context.model_name, options)
    for key, pool in (("NUM_THREADS", settings.INTRA_OP), ("NUM_INTEROP_THREADS", settings.INTER_OP)):
        if key in parameters:
            number = parse_integer(context.model_name, key, parameters[key])
            settings.set_threads(context.model_name, key, pool, number)
    _log.info(  # what torch runs with, in the words of Triton's runtime
        "Torch parallelism settings for '%s': NUM_THREADS = %d; NUM_INTEROP_THREADS = %d;",
        context.model_name,
        torch.get_num_threads(),
        torch.get_num_interop_threads(),
    )
    return PythonRuntimeModel(context, _model_file(context), options)


def _model_file(context: ModelLoadContext) -> Path:
    names = list(CANDIDATES)
    if context.config.default_model_filename:
        names.insert(0, context.config.default_model_filename)
    for name in names:
        path = context.path(name, "default_model_filename", in_version=True)
        if path.is_file():
            return path
    raise NaiadError(
        f"model '{context.model_name}' (runtime 'model.py'): no model found in {context.version_dir}: looked for "
        f"{names}; put the nn.Module's source in model.py (its weights, if any, in model.pt) or a TorchScript "
        "model.pt there",
        ErrorCode.UNAVAILABLE,
    )


def _compile_options(model_name: str, text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise invalid_arg(
            f"model '{model_name}': parameter 'TORCH_COMPILE_OPTIONAL_PARAMETERS' is not JSON ({error})"
        ) from None
    if not isinstance(options, dict):
        raise invalid_arg(
            f"model '{model_name}': parameter 'TORCH_COMPILE_OPTIONAL_PARAMETERS' must be a JSON object of "
            "torch.compile keyword arguments"
        )
    if "model" in options:
        raise invalid_arg(f"model '{model_name}': 'model' is not an optional parameter for 'torch.compile'")
    return options


def _module_class(model_name: str, module: ModuleType) -> type[torch.nn.Module]:
    """The first ``nn.Module`` subclass (by name, Triton's ``dir()`` order) the file defines, else the
    first it imports (Triton takes the first of either)."""
    classes = [
        value
        for _, value in sorted(vars(module).items())
        if isinstance(value, type) and issubclass(value, torch.nn.Module)
    ]
    own = [value for value in classes if value.__module__ == module.__name__]
    if own or classes:
        return (own or classes)[0]
    raise NaiadError(
        f"model '{model_name}': Cannot find a subclass of torch.nn.Module in '{module.__file__}'",
        ErrorCode.INVALID_ARG,
    )


def _parameter_device(model_name: str, module: torch.nn.Module) -> torch.device:
    """KIND_MODEL: the device of the module's first parameter, as Triton's runtime decides."""
    for parameter in module.parameters():
        return parameter.device
    raise NaiadError(
        f"model '{model_name}': Cannot determine model device (KIND_MODEL, no parameters)", ErrorCode.INVALID_ARG
    )
