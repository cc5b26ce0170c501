"""Checks a request against its model's config before it is queued, with Triton's texts."""

from __future__ import annotations

from collections.abc import Sequence

from naiad.errors import invalid_arg
from naiad.models import ModelSignature
from naiad.tensor import Tensor

_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim in "
    "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
    "more info on max_batch_size."
)


def request_prefix(request_id: str) -> str:
    """Triton's ``[request id: ...]`` prefix of validation messages."""
    return f"[request id: {request_id or '<id_unknown>'}] "


_LISTED_NAMES = 32  # an error lists at most this many names (thousands would not fit a gRPC trailer)


def _format_names(names: Sequence[str]) -> str:
    shown = ",".join(f"'{name[:256]}'" for name in names[:_LISTED_NAMES])
    more = f",... ({len(names) - _LISTED_NAMES} more)" if len(names) > _LISTED_NAMES else ""
    return f"[{shown}{more}]"


def _format_shape(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(dim) for dim in shape) + "]"


def validate_outputs(model_name: str, signature: ModelSignature, requested: Sequence[str]) -> None:
    """Every requested output must exist in the config."""
    for name in requested:
        if name not in signature.outputs:
            raise invalid_arg(f"unexpected inference output '{name}' for model '{model_name}'")


def validate_inputs(model_name: str, signature: ModelSignature, inputs: Sequence[Tensor], request_id: str) -> int:
    """Check names, datatypes and shapes in Triton's order (the count, then each input: an unknown name
    is named even where the count is right); return the request's batch size (1 if not batching)."""
    specs = signature.inputs
    given = [tensor.name for tensor in inputs]
    if not len(signature.required_inputs) <= len(given) <= len(specs):
        _wrong_input_count(model_name, signature, given, request_id)
    batching = signature.max_batch_size > 0
    batch_size: int | None = None
    for tensor in inputs:
        spec = specs.get(tensor.name)
        if spec is None:
            raise invalid_arg(f"unexpected inference input '{tensor.name}' for model '{model_name}'")
        if tensor.datatype != spec.datatype.wire:
            raise invalid_arg(
                f"{request_prefix(request_id)}inference input '{tensor.name}' data-type is '{tensor.datatype}', "
                f"but model '{model_name}' expects '{spec.datatype.wire}'"
            )
        shape = tensor.shape
        dims = shape
        if batching and not spec.is_shape_tensor:
            if not shape:
                raise invalid_arg(
                    f"{request_prefix(request_id)}input '{tensor.name}' has no batch dimension but model "
                    f"'{model_name}' batches (max_batch_size {signature.max_batch_size}). {_BATCH_NOTE}"
                )
            if batch_size is None:
                batch_size = shape[0]
            elif shape[0] != batch_size:
                raise invalid_arg(
                    f"{request_prefix(request_id)}input '{tensor.name}' batch size does not match other inputs "
                    f"for '{model_name}'"
                )
            dims = shape[1:]
        if dims != spec.dims and not _dims_match(dims, spec.dims):
            expected_shape = ([-1] if batching else []) + list(spec.dims)
            raise invalid_arg(
                f"{request_prefix(request_id)}unexpected shape for input '{tensor.name}' for model "
                f"'{model_name}'. Expected {_format_shape(expected_shape)}, got {_format_shape(shape)}. "
                + (_BATCH_NOTE if batching else "")
            )
    # As many inputs as the model takes, each known, yet a required one missing: Triton 2.51 runs
    # such a request; naiad refuses it as it refuses too few inputs.
    if any(name not in given for name in signature.required_inputs):
        _wrong_input_count(model_name, signature, given, request_id)
    if batching and batch_size is not None and batch_size > signature.max_batch_size:
        raise invalid_arg(
            f"{request_prefix(request_id)}inference request batch-size must be <= {signature.max_batch_size} "
            f"for '{model_name}'"
        )
    return batch_size if batching and batch_size is not None else 1


def _wrong_input_count(model_name: str, signature: ModelSignature, given: list[str], request_id: str) -> None:
    """Triton's error for inputs that are too many or miss a required one."""
    required = signature.required_inputs
    missing = [name for name in required if name not in given]
    total = len(signature.inputs)
    expected = (
        f"{len(required)} inputs"
        if len(required) == total
        else (f"number of inputs between {len(required)} and {total}")
    )
    # With nothing missing Triton writes "]": its list builder drops a trailing comma, here the "[".
    missing_names = _format_names(missing) if missing else "]"
    raise invalid_arg(
        f"{request_prefix(request_id)}expected {expected} but got {len(given)} inputs for model '{model_name}'. "
        f"Got input(s) {_format_names(given)}, but missing required input(s) {missing_names}. "
        "Please provide all required input(s)."
    )


def _dims_match(shape: Sequence[int], dims: Sequence[int]) -> bool:
    if len(shape) != len(dims):
        return False
    return all(want == -1 or got == want for got, want in zip(shape, dims, strict=True))
