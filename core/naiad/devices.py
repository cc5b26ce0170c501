"""What accelerators this host has, without importing any framework."""

from __future__ import annotations

import os
from pathlib import Path

_NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def gpu_count() -> int:
    """Number of CUDA devices visible to this process (honours ``CUDA_VISIBLE_DEVICES``)."""
    present = len(list(_NVIDIA_PROC.iterdir())) if _NVIDIA_PROC.is_dir() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return present
    listed = [item for item in visible.split(",") if item.strip() and item.strip() != "-1"]
    return min(present, len(listed))
