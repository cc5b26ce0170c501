"""The classification extension: an output replaced by its top-k classes, as Triton returns them.

A request that asks for an output with ``classification: k`` gets, per batch item (or for the whole
tensor of a model that does not batch), the ``k`` largest values in descending order (ties in index
order), each as the BYTES string ``"<value>:<index>"`` or ``"<value>:<index>:<label>"``. Floats are
written as C's ``%f`` writes them, integers plainly; ``<index>`` counts the item's elements in order;
``<label>`` is that line of the output's ``label_filename``, when it has one; an ensemble output
without one takes the labels of the step output that produces it, as Triton fills them at load.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from naiad.errors import NaiadError, invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.tensor import Tensor

_INTEGERS = frozenset({"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"})
_FLOATS = frozenset({"FP32", "FP64"})


def read_labels(config: ModelConfig, resolve: Callable[[str, str], Path]) -> dict[str, tuple[str, ...]]:
    """Each output's labels from its ``label_filename`` (one per line, in the model's folder), read at load.

    ``resolve(relative, setting)`` turns a config path into one confined to the model's folder.
    """
    labels: dict[str, tuple[str, ...]] = {}
    for output in config.output:
        if not output.label_filename:
            continue
        path = resolve(output.label_filename, "label_filename")
        try:
            labels[output.name] = tuple(path.read_text().splitlines())
        except OSError as error:
            raise invalid_arg(
                f"model '{config.name}': cannot read label_filename '{output.label_filename}' of output "
                f"'{output.name}': {error.strerror}; put the file in the model folder or remove the setting"
            ) from None
    return labels


Labels = dict[str, tuple[str, ...]]


def with_step_labels(
    config: ModelConfig,
    labels: Mapping[str, tuple[str, ...]],
    step_labels: Callable[[str, int], Mapping[str, tuple[str, ...]]],
) -> Labels:
    """An ensemble's labels: ``labels`` (from its own label files), and for each output without any, the
    labels of the step output that produces it (``step_labels(model, version)`` gives a loaded step's;
    version -1 is its latest)."""
    filled = dict(labels)
    outputs = {output.name for output in config.output}
    for step in config.ensemble_scheduling.step:
        for model_output, tensor in step.output_map.items():
            if tensor in filled or tensor not in outputs:
                continue
            try:
                found = step_labels(step.model_name, step.model_version).get(model_output)
            except NaiadError:  # the step went away meanwhile: its labels with it
                continue
            if found:
                filled[tensor] = found
    return filled


def classify(tensor: Tensor, count: int, *, batching: bool, labels: Sequence[str] = ()) -> Tensor:
    """``tensor`` replaced by its top-``count`` classes (see the module docstring)."""
    text: Callable[[Any], str]
    if tensor.datatype in _FLOATS:
        text = _float_text
    elif tensor.datatype in _INTEGERS:
        text = _int_text
    else:
        raise invalid_arg(f"class result not available for output due to unsupported type '{tensor.datatype}'")
    data = tensor.numpy()
    items = data.reshape(data.shape[0], -1) if batching and data.ndim else data.reshape(1, -1)
    rows = [_top(item.tolist(), count, text, labels) for item in items]
    result = np.empty((len(rows), len(rows[0]) if rows else 0), dtype=np.object_)
    for index, row in enumerate(rows):
        result[index, :] = row
    return Tensor(tensor.name, "BYTES", result if batching else result.reshape(-1))


def _top(values: list[Any], count: int, text: Callable[[Any], str], labels: Sequence[str]) -> list[bytes]:
    best = heapq.nlargest(count, range(len(values)), key=values.__getitem__)  # stable: ties keep index order
    classes = []
    for index in best:
        entry = f"{text(values[index])}:{index}"
        if index < len(labels) and labels[index]:
            entry += f":{labels[index]}"
        classes.append(entry.encode())
    return classes


def _float_text(value: float) -> str:
    return "%f" % value  # noqa: UP031 - C's %f is the format Triton writes


def _int_text(value: int) -> str:
    return str(value)
