"""Fill ``input__0`` / ``output__0`` and batching from the model, and check what config.pbtxt says.

Runs for every load: user-given tensors are always checked against the model; missing ones
(and ``max_batch_size`` / ``dynamic_batching``) are only added when auto-complete is on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from naiad.backend import (
    DataType,
    ErrorCode,
    ModelConfig,
    ModelInput,
    ModelLoadContext,
    ModelOutput,
    NaiadError,
)
from naiad_fil.engines.base import ModelFacts
from naiad_fil.postprocess import OutputRule

INPUT_NAME = "input__0"
OUTPUT_NAME = "output__0"
SHAP_OUTPUT_NAME = "treeshap_output"


def complete_config(context: ModelLoadContext, path: Path, facts: ModelFacts, rule: OutputRule) -> OutputRule:
    """Complete and check ``context.config`` in place; the rule with the config's output width applied."""
    config = context.config
    checker = _Checker(config, path)
    checker.tensor_names()
    if context.auto_complete and config.max_batch_size == 0 and not config.input and not config.output:
        _complete_batching(config, context.default_max_batch_size)
    batch = config.max_batch_size > 0
    input_dims = [facts.num_features] if batch else [-1, facts.num_features]
    if config.input:
        checker.tensor(config.input[0], "input", input_dims, f"{facts.num_features} features")
    elif context.auto_complete:
        config.input.add(name=INPUT_NAME, data_type=DataType.TYPE_FP32, dims=input_dims)
    else:
        raise checker.missing("input", INPUT_NAME, input_dims)
    if config.output:
        output = config.output[0]
        widths = rule.accepted_widths()
        configured = output.dims[-1] if output.dims else -1
        width = configured if configured in widths else rule.width
        what = _output_meaning(rule, widths)
        checker.tensor(output, "output", [width] if batch else [-1, width], what)
        rule = dataclasses.replace(rule, binary_as_two_columns=width == 2 and rule.num_outputs == 1)
    elif context.auto_complete:
        config.output.add(
            name=OUTPUT_NAME, data_type=DataType.TYPE_FP32, dims=[rule.width] if batch else [-1, rule.width]
        )
    else:
        raise checker.missing("output", OUTPUT_NAME, [rule.width] if batch else [-1, rule.width])
    return rule


def _complete_batching(config: ModelConfig, default_max_batch_size: int) -> None:
    config.max_batch_size = max(default_max_batch_size, 0)
    if config.max_batch_size > 1 and config.WhichOneof("scheduling_choice") is None:
        config.dynamic_batching.SetInParent()


def _output_meaning(rule: OutputRule, widths: Sequence[int]) -> str:
    if not rule.classifier:
        return f"{rule.num_outputs} regression output(s) per row"
    if not rule.predict_proba:
        return "one class id per row (is_classifier without predict_proba)"
    if len(widths) > 1:
        return "a binary classifier's probability per row (1, or 2 columns for both classes)"
    return f"{rule.num_outputs} class probabilities per row (predict_proba)"


class _Checker:
    """Compares config.pbtxt's tensors with what the FIL backend and the model file expect."""

    def __init__(self, config: ModelConfig, path: Path) -> None:
        self.config = config
        self.path = path

    def fail(self, message: str, code: ErrorCode = ErrorCode.INVALID_ARG) -> NaiadError:
        return NaiadError(f"model '{self.config.name}' (file '{self.path}'): {message}", code)

    def missing(self, kind: str, name: str, dims: list[int]) -> NaiadError:
        return self.fail(
            f"config.pbtxt has no {kind} and auto-complete is disabled; add"
            f' {kind} [ {{ name: "{name}" data_type: TYPE_FP32 dims: {_dims(dims)} }} ]'
        )

    def tensor_names(self) -> None:
        names = [tensor.name for tensor in self.config.input]
        if len(names) > 1 or (names and names[0] != INPUT_NAME):
            raise self.fail(
                f"config.pbtxt lists input(s) {_names(names)}, but FIL models take exactly one input named"
                f" '{INPUT_NAME}'; rename it in config.pbtxt"
            )
        outputs = [tensor.name for tensor in self.config.output]
        if SHAP_OUTPUT_NAME in outputs:
            raise self.fail(
                f"output '{SHAP_OUTPUT_NAME}' (SHAP values) is not supported by naiad yet; remove it from config.pbtxt",
                ErrorCode.UNSUPPORTED,
            )
        if len(outputs) > 1 or (outputs and outputs[0] != OUTPUT_NAME):
            raise self.fail(
                f"config.pbtxt lists output(s) {_names(outputs)}, but FIL models produce one output named"
                f" '{OUTPUT_NAME}'; rename it in config.pbtxt"
            )

    def tensor(self, tensor: ModelInput | ModelOutput, kind: str, expected: list[int], meaning: str) -> None:
        if tensor.data_type != DataType.TYPE_FP32:
            raise self.fail(
                f"config.pbtxt gives {kind} '{tensor.name}' data_type {DataType.Name(tensor.data_type)}, but FIL"
                f" models use TYPE_FP32; set data_type: TYPE_FP32"
            )
        given = list(tensor.dims)
        if len(given) != len(expected) or any(
            g != e and -1 not in (g, e) for g, e in zip(given, expected, strict=True)
        ):
            batching = f"max_batch_size {self.config.max_batch_size}"
            raise self.fail(
                f"config.pbtxt gives {kind} '{tensor.name}' dims {_dims(given)}, but the model has {meaning},"
                f" so with {batching} the dims are {_dims(expected)}; set dims: {_dims(expected)}"
            )


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _dims(dims: Sequence[int]) -> str:
    return "[ " + ", ".join(str(dim) for dim in dims) + " ]"
