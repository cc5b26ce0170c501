"""An ensemble's steps checked against its composing models' final configs, with Triton's messages.

Runs when the ensemble loads, after its composing models have: every step's model must be READY,
its inputs and outputs mapped, each ensemble tensor's datatype and shape consistent between every
model that reads or writes it, and steps must not join responses of different decoupled models.
The ensemble is decoupled when any step upstream of its outputs is. A step that names a model or
tensor that does not exist raises a :class:`~naiad.suggestions.SuggestingError` with the close
names that do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from naiad.ensemble.graph import EnsembleGraph
from naiad.errors import NaiadError, invalid_arg
from naiad.protocol.model_config_pb2 import DataType, ModelConfig
from naiad.suggestions import SuggestingError, close_matches

ConfigOf = Callable[[str, int], ModelConfig]
"""The final config of a composing model's version (-1: the latest); raises NaiadError when it has none."""

FailureOf = Callable[[str], "str | None"]
"""Why a composing model's last load failed, in Triton's words, or None."""


@dataclass(eq=False)
class _TensorNode:
    """What an ensemble tensor is, and from which model that was inferred."""

    model: str
    datatype: int = 0
    dims: tuple[int, ...] = ()
    full_dims: tuple[int, ...] = ()
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    previous: list[_TensorNode] = field(default_factory=list)
    following: list[_TensorNode] = field(default_factory=list)
    siblings: _Siblings | None = None


@dataclass(eq=False)
class _Siblings:
    """The outputs of one step share one decoupled label."""

    label: int = 0
    visited: bool = False


def _node(model: str, batching: bool, datatype: int, dims: tuple[int, ...]) -> _TensorNode:
    return _TensorNode(model, datatype, dims, ((-1,) if batching else ()) + dims)


def check_composition(
    config: ModelConfig, graph: EnsembleGraph, config_of: ConfigOf, failure_of: FailureOf, known: set[str]
) -> bool:
    """Check ``config``'s steps against the composing models; returns whether the ensemble is decoupled.

    ``known``: the models the server knows of (a step naming another is "not available").
    """
    name = config.name
    missing = sorted({step.model_name for step in graph.steps if step.model_name not in known})
    if missing:
        raise SuggestingError(
            f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}",
            name=missing[0],
            suggestions=close_matches(missing[0], known),
        )
    batching = config.max_batch_size > 0
    tensors: dict[str, _TensorNode] = {}
    for tensor in config.input:
        dims = tuple(tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims)
        tensors[tensor.name] = _node(name, batching, tensor.data_type, dims)
    sink = _TensorNode(name)
    for output in config.output:
        dims = tuple(output.reshape.shape if output.HasField("reshape") else output.dims)
        node = tensors.setdefault(output.name, _node(name, batching, output.data_type, dims))
        sink.previous.append(node)
        node.following.append(sink)
    for step in graph.steps:
        composing = _composing_config(name, step.model_name, step.model_version, config_of, failure_of)
        if composing.max_batch_size != 0 and composing.max_batch_size < config.max_batch_size:
            raise invalid_arg(
                f"ensemble {name} allows maximum batch size {config.max_batch_size}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {composing.max_batch_size}"
            )
        _map_step(name, step.model_name, dict(step.input_map), dict(step.output_map), composing, tensors)
    return _decoupled(name, config, tensors)


def _composing_config(
    ensemble: str, model: str, version: int, config_of: ConfigOf, failure_of: FailureOf
) -> ModelConfig:
    try:
        return config_of(model, version)
    except NaiadError:
        if version == -1:
            failure = failure_of(model)
            why = f" Model '{model}' loading failed with error: {failure}" if failure else ""
            raise invalid_arg(f"ensemble '{ensemble}' depends on '{model}' which has no loaded version.{why}") from None
        raise invalid_arg(
            f"ensemble '{ensemble}' depends on '{model}' whose required version {version} is not loaded."
        ) from None


def _map_step(
    ensemble: str,
    model: str,
    input_map: dict[str, str],
    output_map: dict[str, str],
    config: ModelConfig,
    tensors: dict[str, _TensorNode],
) -> None:
    batching = config.max_batch_size > 0
    inputs = {tensor.name: tensor for tensor in config.input}
    for input_name, tensor in input_map.items():
        if input_name not in inputs:
            raise SuggestingError(
                f"in ensemble {ensemble}, ensemble tensor {tensor} is mapping to non-existing input {input_name} "
                f"in model {model}",
                name=input_name,
                suggestions=close_matches(input_name, inputs),
            )
    for model_input in config.input:
        mapped = input_map.get(model_input.name)
        if mapped is None:
            if model_input.optional:
                continue
            raise invalid_arg(
                f"in ensemble {ensemble}, input {model_input.name} in model {model} is not mapped to any ensemble "
                "tensors"
            )
        node = _node(model, batching, model_input.data_type, tuple(model_input.dims))
        _merge(ensemble, mapped, node, tensors)
    outputs = {tensor.name: tensor for tensor in config.output}
    for model_output, tensor in output_map.items():
        if model_output not in outputs:
            raise SuggestingError(
                f"in ensemble {ensemble}, ensemble tensor {tensor} is mapped from non-existing output "
                f"{model_output} in model {model}",
                name=model_output,
                suggestions=close_matches(model_output, outputs),
            )
    siblings = _Siblings()
    decoupled = config.model_transaction_policy.decoupled
    for model_output, tensor in output_map.items():
        spec = outputs[model_output]
        node = _merge(ensemble, tensor, _node(model, batching, spec.data_type, tuple(spec.dims)), tensors)
        node.siblings = siblings
        node.decoupled = decoupled
        for source in input_map.values():
            node.previous.append(tensors[source])
            tensors[source].following.append(node)


def _merge(ensemble: str, tensor: str, node: _TensorNode, tensors: dict[str, _TensorNode]) -> _TensorNode:
    """The tensor's node, checked against ``node`` when another model already said what it is."""
    known = tensors.get(tensor)
    if known is None:
        tensors[tensor] = node
        return node
    where = f"in ensemble {ensemble}, ensemble tensor {tensor}: "
    if known.datatype != node.datatype:
        raise invalid_arg(
            f"{where}inconsistent data type: {DataType.Name(known.datatype)} is inferred from model {known.model} "
            f"while {DataType.Name(node.datatype)} is inferred from model {node.model}"
        )
    if not _dims_match(known.dims, node.dims) and not _dims_match(known.full_dims, node.full_dims):
        raise invalid_arg(
            f"{where}inconsistent shape: {_dims(known.full_dims)} is inferred from model {known.model} while "
            f"{_dims(node.full_dims)} is inferred from model {node.model}"
        )
    return known


def _dims_match(left: tuple[int, ...], right: tuple[int, ...]) -> bool:
    return len(left) == len(right) and all(a == b or a == -1 or b == -1 for a, b in zip(left, right, strict=True))


def _dims(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _decoupled(ensemble: str, config: ModelConfig, tensors: dict[str, _TensorNode]) -> bool:
    """Label each tensor with the decoupled step it descends from; a step must not mix labels."""
    labels = 0
    waiting: deque[_TensorNode] = deque()
    for tensor in config.input:
        node = tensors[tensor.name]
        node.visited = True
        waiting.append(node)
    while waiting:
        current = waiting.popleft()
        for following in current.following:
            if following.visited or not all(node.visited for node in following.previous):
                continue
            label = following.previous[0].label
            if any(node.label != label for node in following.previous):
                raise invalid_arg(
                    f"in ensemble {ensemble}, step of model '{following.model}' receives inputs originated from "
                    "different decoupled models"
                )
            siblings = following.siblings
            if siblings is not None and siblings.visited:
                following.label = siblings.label
            else:
                if following.decoupled:
                    labels += 1
                    label = labels
                following.label = label
                if siblings is not None:
                    siblings.label, siblings.visited = label, True
            following.visited = True
            waiting.append(following)
    return labels != 0
