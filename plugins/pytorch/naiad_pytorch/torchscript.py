"""Loading a TorchScript file and reading its ``forward`` schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

from naiad.backend import ErrorCode, NaiadError
from naiad_pytorch.schema import ForwardArg, ForwardReturn, ForwardSchema, Kind

_HINT = (
    "the file must be a TorchScript archive written by torch.jit.save(torch.jit.script(model) or "
    "torch.jit.trace(model, example), path); torch.save() pickles and torch.export .pt2 packages are not TorchScript"
)


def load_module(
    model_name: str, model_file: Path, device: torch.device | None, *, inference_mode: bool
) -> torch.jit.ScriptModule:
    """``torch.jit.load`` onto ``device`` (None: where the file's tensors were saved)."""
    try:
        # Triton loads under the same InferenceMode guard it executes with.
        with torch.inference_mode(inference_mode):
            module = torch.jit.load(str(model_file), map_location=device)  # type: ignore[no-untyped-call]
    except Exception as error:
        raise NaiadError(
            f"failed to load model '{model_name}': {type(error).__name__}: {_first_line(error)} "
            f"(file '{model_file}'; {_HINT})",
            ErrorCode.INTERNAL,
        ) from error
    if not hasattr(module, "forward"):
        raise NaiadError(
            f"failed to load model '{model_name}': '{model_file}' has no forward method to run",
            ErrorCode.INVALID_ARG,
        )
    return cast(torch.jit.ScriptModule, module)


def schema_of(module: torch.jit.ScriptModule) -> ForwardSchema:
    """The arguments (``self`` dropped) and return type of ``module.forward``."""
    schema = module.forward.schema  # type: ignore[attr-defined]
    arguments = list(schema.arguments)
    if arguments and arguments[0].type.kind() == "ClassType":
        arguments = arguments[1:]
    args = tuple(ForwardArg(arg.name, _kind(arg.type), str(arg.type), arg.has_default_value()) for arg in arguments)
    returns = list(schema.returns)
    if len(returns) != 1:
        result = ForwardReturn(Kind.OTHER, f"{len(returns)} values")
    else:
        result_type = returns[0].type
        kind = _kind(result_type)
        elements = tuple(_kind(element) for element in result_type.elements()) if kind is Kind.TUPLE else ()
        result = ForwardReturn(kind, str(result_type), elements)
    return ForwardSchema(args, result)


def _kind(value_type: Any) -> Kind:
    name = value_type.kind()
    if name == "TensorType":
        return Kind.TENSOR
    if name == "TupleType":
        return Kind.TUPLE
    if name == "OptionalType" and value_type.getElementType().kind() == "TensorType":
        return Kind.OPTIONAL_TENSOR
    if name == "ListType":
        element = value_type.getElementType().kind()
        if element == "StringType":
            return Kind.STRING_LIST
        if element == "TensorType":
            return Kind.TENSOR_LIST
    if (
        name == "DictType"
        and value_type.getKeyType().kind() == "StringType"
        and value_type.getValueType().kind() == "TensorType"
    ):
        return Kind.TENSOR_DICT
    return Kind.OTHER


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
