"""Checks a request against its model's config before it is queued, with Triton's texts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

from naiad.errors import ByteSizeMismatch, NaiadError, invalid_arg, request_prefix
from naiad.hash_order import map_order
from naiad.models import ModelSignature
from naiad.tensor import Tensor

_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim in "
    "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
    "more info on max_batch_size."
)


_Found = TypeVar("_Found")

_LISTED_NAMES = 32  # an error lists at most this many names (thousands would not fit a gRPC trailer)


def _format_names(names: Sequence[str]) -> str:
    shown = ",".join(f"'{name[:256]}'" for name in names[:_LISTED_NAMES])
    more = f",... ({len(names) - _LISTED_NAMES} more)" if len(names) > _LISTED_NAMES else ""
    return f"[{shown}{more}]"


def _format_shape(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(dim) for dim in shape) + "]"


def input_already_exists(name: str, request_id: str) -> NaiadError:
    """Triton's refusal of a request that names input ``name`` twice."""
    return invalid_arg(f"{request_prefix(request_id)}input '{name}' already exists in request")


def first_repeated(names: Sequence[str]) -> str:
    """The first of ``names`` that came before (there is one)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    raise ValueError("no name is repeated")


def validate_outputs(model_name: str, signature: ModelSignature, requested: Sequence[str]) -> None:
    """Every requested output must exist in the config; Triton names the first unknown one in sorted order."""
    unknown = [name for name in requested if name not in signature.outputs]
    if unknown:
        raise invalid_arg(f"unexpected inference output '{min(unknown)}' for model '{model_name}'")


def validate_inputs(model_name: str, signature: ModelSignature, inputs: Sequence[Tensor], request_id: str) -> int:
    """Check the inputs as Triton does, and return the request's batch size (1 if not batching, 0 if
    every input leads with 0): their count, then their names (with their batch dimensions, for a
    batching model), then each one's datatype and shape. Where several inputs are wrong, the error
    is the one Triton gives: it checks them in its map's order (:mod:`naiad.hash_order`)."""
    given = [tensor.name for tensor in inputs]
    if not len(signature.required_inputs) <= len(given) <= len(signature.inputs):
        _wrong_input_count(model_name, signature, given, request_id)
    # Where an input leads with 0, Triton's batch size depends on its order: checked in that order only.
    reordered = len(inputs) > 1 and bool(zero_led(signature, inputs))
    try:
        batch_size = _check_inputs(model_name, signature, _in_map_order(inputs) if reordered else inputs, request_id)
    except NaiadError:
        if len(inputs) > 1 and not reordered:
            _check_inputs(model_name, signature, _in_map_order(inputs), request_id)
        raise
    # As many inputs as the model takes, each known, yet a required one missing: Triton 2.51 runs
    # such a request; naiad refuses it as it refuses too few inputs.
    if any(name not in given for name in signature.required_inputs):
        _wrong_input_count(model_name, signature, given, request_id)
    return batch_size


def _in_map_order(inputs: Sequence[Tensor]) -> list[Tensor]:
    return [inputs[index] for index in map_order([tensor.name for tensor in inputs])]


def check_empty_items(
    model_name: str, signature: ModelSignature, inputs: Sequence[Tensor], batch_size: int, request_id: str
) -> None:
    """Refuse a batching model's inputs that lead with 0 (:func:`zero_led`), as far as Triton does.

    Triton counts a leading 0 as no batch size at all: such an input takes the request's batch size
    from the others, or one item if every input leads with 0, and data sized for that many items,
    so it refuses one with no data in its usual words (the ones given here). Where the items hold no
    elements either, Triton never answers (batch size 0) or hands the model a tensor whose shape is
    not the request's; naiad refuses those requests."""
    leading_zero = zero_led(signature, inputs)
    mismatched: dict[str, str] = {}
    for tensor in leading_zero:
        spec = signature.inputs[tensor.name]
        items = max(batch_size, 1) * math.prod(tensor.shape[1:])
        if not items:
            continue
        if tensor.datatype == "BYTES":
            mismatched[tensor.name] = string_count_mismatch(0, items, tensor.name, model_name, request_id)
        else:
            mismatched[tensor.name] = (
                f"{request_prefix(request_id)}input byte size mismatch for input '{tensor.name}' for model "
                f"'{model_name}'. Expected {items * spec.datatype.byte_size}, got 0"
            )
    if mismatched:
        raise ByteSizeMismatch(first_in_triton_order(mismatched, [tensor.name for tensor in inputs]))
    if leading_zero:
        first = leading_zero[0]
        raise invalid_arg(
            f"{request_prefix(request_id)}input '{first.name}' for model '{model_name}' has shape "
            f"{_format_shape(first.shape)}: a batch of 0 items. A model with max_batch_size "
            f"{signature.max_batch_size} takes 1 to {signature.max_batch_size} items per request, as many in "
            "every input; send at least one item."
        )


def zero_led(signature: ModelSignature, inputs: Sequence[Tensor]) -> list[Tensor]:
    """A batching model's inputs whose shape leads with 0 (shape tensors aside)."""
    found: list[Tensor] = []
    if signature.max_batch_size:
        for tensor in inputs:
            spec = signature.inputs.get(tensor.name)
            if tensor.shape[:1] == (0,) and spec is not None and not spec.is_shape_tensor:
                found.append(tensor)
    return found


def string_count_mismatch(got: int, count: int, name: str, model_name: str, request_id: str) -> str:
    """Triton's words for BYTES data with more or fewer strings than its shape holds."""
    if got < count:
        return (
            f"{request_prefix(request_id)}expected {count} string elements for inference input '{name}' for "
            f"model '{model_name}', got {got}"
        )
    return (
        f"{request_prefix(request_id)}unexpected number of string elements {got} for inference input '{name}' "
        f"for model '{model_name}', expecting {count}"
    )


def first_in_triton_order(found: Mapping[str, _Found], names: Sequence[str]) -> _Found:
    """Of what was ``found`` for some of a request's inputs (``names``, in request order), what
    Triton reports: the first in its map's order."""
    return next(found[names[index]] for index in map_order(names) if names[index] in found)


def _check_inputs(model_name: str, signature: ModelSignature, inputs: Sequence[Tensor], request_id: str) -> int:
    """Check the inputs in the given order, each pass over all of them; return the batch size."""
    specs = signature.inputs
    batching = signature.max_batch_size > 0
    if batching:
        batch_size = _batch_size(model_name, signature, inputs, request_id)
    else:
        batch_size = 1
        for tensor in inputs:
            if tensor.name not in specs:
                raise _unknown_input(model_name, tensor.name)
    for tensor in inputs:
        spec = specs[tensor.name]
        if tensor.datatype != spec.datatype.wire:
            raise invalid_arg(
                f"{request_prefix(request_id)}inference input '{tensor.name}' data-type is '{tensor.datatype}', "
                f"but model '{model_name}' expects '{spec.datatype.wire}'"
            )
        dims = tensor.shape[1:] if batching and not spec.is_shape_tensor else tensor.shape
        if dims != spec.dims and not _dims_match(dims, spec.dims):
            expected_shape = ([-1] if batching else []) + list(spec.dims)
            raise invalid_arg(
                f"{request_prefix(request_id)}unexpected shape for input '{tensor.name}' for model "
                f"'{model_name}'. Expected {_format_shape(expected_shape)}, got {_format_shape(tensor.shape)}. "
                + (_BATCH_NOTE if batching else "")
            )
    return batch_size


def _batch_size(model_name: str, signature: ModelSignature, inputs: Sequence[Tensor], request_id: str) -> int:
    """The batch size every input of a batching model leads with (shape tensors aside), within the limit;
    each input's name is checked as its turn comes, as Triton does for batching models."""
    batch_size: int | None = None
    for tensor in inputs:
        spec = signature.inputs.get(tensor.name)
        if spec is None:
            raise _unknown_input(model_name, tensor.name)
        if spec.is_shape_tensor:
            continue
        if not tensor.shape:
            raise invalid_arg(
                f"{request_prefix(request_id)}input '{tensor.name}' has no shape but model requires batch dimension "
                f"for '{model_name}'"
            )
        if not batch_size:  # a leading 0 counts as none, as in Triton
            batch_size = tensor.shape[0]
        elif tensor.shape[0] != batch_size:
            raise invalid_arg(
                f"{request_prefix(request_id)}input '{tensor.name}' batch size does not match other inputs "
                f"for '{model_name}'"
            )
    if batch_size is not None and batch_size > signature.max_batch_size:
        raise invalid_arg(
            f"{request_prefix(request_id)}inference request batch-size must be <= {signature.max_batch_size} "
            f"for '{model_name}'"
        )
    return 1 if batch_size is None else batch_size


def _unknown_input(model_name: str, name: str) -> NaiadError:
    return invalid_arg(f"unexpected inference input '{name}' for model '{model_name}'")


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
    walked = [given[index] for index in map_order(given)]  # the order Triton lists them in
    raise invalid_arg(
        f"{request_prefix(request_id)}expected {expected} but got {len(given)} inputs for model '{model_name}'. "
        f"Got input(s) {_format_names(walked)}, but missing required input(s) {missing_names}. "
        "Please provide all required input(s)."
    )


def _dims_match(shape: Sequence[int], dims: Sequence[int]) -> bool:
    if len(shape) != len(dims):
        return False
    return all(want == -1 or got == want for got, want in zip(shape, dims, strict=True))
