"""Which GPU a GPU engine's worker processes see: the instance group's, as Triton's vLLM backend does.

vLLM and TensorRT-LLM choose devices themselves, in worker processes they start while loading. A
single-GPU model on ``cuda:<n>`` (a KIND_GPU instance) gets ``CUDA_VISIBLE_DEVICES`` narrowed to that
device while its engine starts, so two such models on two GPUs do not both land on the first one.
Multi-GPU models (KIND_MODEL) see every device.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

VISIBLE = "CUDA_VISIBLE_DEVICES"


def world_size(args: Mapping[str, Any]) -> int:
    """How many GPUs the engine arguments ask for: tensor times pipeline parallelism."""
    return int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))


def visible_devices(device: str, gpus: int, current: str | None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value that shows only ``device``; None to leave it as it is.

    ``current`` is the value already set: device ``cuda:1`` under ``"4,5"`` is physical device 5.
    """
    if gpus != 1 or not device.startswith("cuda:"):
        return None
    index = int(device.removeprefix("cuda:"))
    if current is None:
        return str(index)
    listed = [entry.strip() for entry in current.split(",") if entry.strip()]
    return listed[index] if index < len(listed) else None


@contextmanager
def only_device(device: str, gpus: int) -> Iterator[None]:
    """Narrow ``CUDA_VISIBLE_DEVICES`` to ``device`` for the duration (worker processes inherit it)."""
    previous = os.environ.get(VISIBLE)
    narrowed = visible_devices(device, gpus, previous)
    if narrowed is None:
        yield
        return
    os.environ[VISIBLE] = narrowed
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(VISIBLE, None)
        else:
            os.environ[VISIBLE] = previous
