"""Triton's system and CUDA shared-memory extensions: regions clients register, and tensors in them."""

from naiad.shared_memory.registry import CUDA, SYSTEM, RegionReference, SharedMemoryRegistry, Window, window_of
from naiad.shared_memory.tensors import RegionDestination, input_tensor

__all__ = [
    "CUDA",
    "SYSTEM",
    "RegionDestination",
    "RegionReference",
    "SharedMemoryRegistry",
    "Window",
    "input_tensor",
    "window_of",
]
