"""The config Triton's vLLM backend completes: its tensors, decoupled, ``max_batch_size: 0``.

Inputs and outputs a config already declares are kept as they are; the missing ones are added.
"""

from __future__ import annotations

from naiad.backend import DataType, ModelConfig

# name, datatype, dims, optional
INPUTS: tuple[tuple[str, int, tuple[int, ...], bool], ...] = (
    ("text_input", DataType.TYPE_STRING, (1,), False),
    ("stream", DataType.TYPE_BOOL, (1,), True),
    ("sampling_parameters", DataType.TYPE_STRING, (1,), True),
    ("exclude_input_in_output", DataType.TYPE_BOOL, (1,), True),
    ("return_finish_reason", DataType.TYPE_BOOL, (1,), True),
    ("return_cumulative_logprob", DataType.TYPE_BOOL, (1,), True),
    ("return_logprobs", DataType.TYPE_BOOL, (1,), True),
    ("return_num_input_tokens", DataType.TYPE_BOOL, (1,), True),
    ("return_num_output_tokens", DataType.TYPE_BOOL, (1,), True),
)
OUTPUTS: tuple[tuple[str, int, tuple[int, ...]], ...] = (
    ("text_output", DataType.TYPE_STRING, (-1,)),
    ("finish_reason", DataType.TYPE_STRING, (-1,)),
    ("cumulative_logprob", DataType.TYPE_FP32, (-1,)),
    ("logprobs", DataType.TYPE_STRING, (-1,)),
    ("num_input_tokens", DataType.TYPE_UINT32, (1,)),
    ("num_output_tokens", DataType.TYPE_UINT32, (-1,)),
)


def complete_config(config: ModelConfig) -> None:
    """Add the missing tensors; make the model decoupled with no batching of its own (the engine batches)."""
    have_inputs = {tensor.name for tensor in config.input}
    for name, datatype, dims, optional in INPUTS:
        if name not in have_inputs:
            config.input.add(name=name, data_type=datatype, dims=dims, optional=optional)
    have_outputs = {tensor.name for tensor in config.output}
    for name, datatype, dims in OUTPUTS:
        if name not in have_outputs:
            config.output.add(name=name, data_type=datatype, dims=dims)
    config.model_transaction_policy.decoupled = True
    config.max_batch_size = 0
