"""``tritonserver`` flags that a Triton command line may carry, so that it starts naiad unchanged.

Three kinds, besides the flags naiad implements (``naiad.cli``):

- flags for parts of Triton naiad does not have (memory pools, agent and cache directories,
  NUMA host policies, GPU load limits, thread pools): accepted, and each one given is named at
  startup as having no effect, with the reason;
- Triton's deprecated ``--trace-*`` spellings: turned into ``--trace-config`` entries, with the
  warning Triton gives;
- endpoints and modes naiad does not offer (SageMaker, Vertex AI, model namespacing): accepted
  while off, refused at startup when turned on, since serving without them would mislead.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

_NO_POOL = "naiad keeps no such memory pool (tensors live in host memory or the framework's own GPU allocator)"
_NO_GPU_ACCOUNTING = "naiad does not place models on GPUs by memory or compute capability"
_NO_THREAD_POOL = "naiad's HTTP and gRPC frontends run on one event loop, without a thread pool to size"

NO_EFFECT: dict[str, str] = {
    "--pinned-memory-pool-byte-size": _NO_POOL,
    "--cuda-memory-pool-byte-size": _NO_POOL,
    "--cuda-virtual-address-size": _NO_POOL,
    "--repoagent-directory": (
        "naiad runs its own 'checksum' repository agent only (a model that names another fails to load, naming it)"
    ),
    "--cache-directory": "naiad's one response cache (local) is built in",
    "--buffer-manager-thread-count": _NO_THREAD_POOL,
    "--http-thread-count": _NO_THREAD_POOL,
    "--grpc-infer-allocation-pool-size": _NO_THREAD_POOL,
    "--host-policy": "naiad does not pin instances to NUMA nodes or CPU cores",
    "--min-supported-compute-capability": _NO_GPU_ACCOUNTING,
    "--model-load-gpu-limit": _NO_GPU_ACCOUNTING,
    "--enable-peer-access": "naiad sets up no CUDA peer access between GPUs",
    "--sagemaker-port": "naiad serves no SageMaker endpoint",
    "--sagemaker-safe-port-range": "naiad serves no SageMaker endpoint",
    "--sagemaker-thread-count": "naiad serves no SageMaker endpoint",
    "--vertex-ai-port": "naiad serves no Vertex AI endpoint",
    "--vertex-ai-thread-count": "naiad serves no Vertex AI endpoint",
    "--vertex-ai-default-model": "naiad serves no Vertex AI endpoint",
}
"""Flags accepted with no effect, and why (each may be given more than once, as Triton's)."""

REFUSED_WHEN_ON: dict[str, str] = {
    "--allow-sagemaker": "naiad serves KServe v2 HTTP/REST and gRPC only, not Amazon SageMaker's protocol",
    "--allow-vertex-ai": "naiad serves KServe v2 HTTP/REST and gRPC only, not Vertex AI's protocol",
    "--model-namespacing": "naiad has no model namespaces: give models distinct names across repositories",
}
"""Boolean flags accepted while false, and why naiad cannot turn them on."""

DEPRECATED_TRACE: dict[str, str] = {
    "--trace-file": "triton,file",
    "--trace-level": "level",
    "--trace-rate": "rate",
    "--trace-count": "count",
    "--trace-log-frequency": "log-frequency",
}

_DEPRECATED_TRACE_USE = {
    "--trace-file": "triton,file=<filepath>",
    "--trace-level": "level=<OFF|TIMESTAMPS|TENSORS>",
    "--trace-rate": "rate=<rate value>",
    "--trace-count": "count=<count value>",
    "--trace-log-frequency": "triton,log-frequency=<log frequency value>",
}
"""What Triton's warning for each deprecated tracing flag says to use instead."""
"""Triton's deprecated tracing flags and the ``--trace-config`` key each stands for."""


def add_triton_arguments(serve: argparse.ArgumentParser, boolean: Callable[[str], bool]) -> None:
    """Add the flags of this module to ``naiad serve``, in a group of their own in ``--help``."""
    group = serve.add_argument_group(
        "accepted for tritonserver command lines",
        "Triton flags for parts naiad does not have: they start naiad unchanged and are named at startup",
    )
    for flag in NO_EFFECT:
        group.add_argument(flag, action="append", default=[], metavar="VALUE", help=NO_EFFECT[flag])
    for flag in REFUSED_WHEN_ON:
        group.add_argument(
            flag, type=boolean, default=False, metavar="BOOL", help=f"false only: {REFUSED_WHEN_ON[flag]}"
        )
    for flag, key in DEPRECATED_TRACE.items():
        group.add_argument(
            flag, action="append", default=[], metavar="VALUE", help=f"deprecated: --trace-config {key}="
        )


def refusal(args: argparse.Namespace) -> str | None:
    """Why naiad cannot start with these flags, or None."""
    for flag, why in REFUSED_WHEN_ON.items():
        if getattr(args, _dest(flag)):
            return f"{flag}=true: {why}; leave it out or set it to false"
    return None


def no_effect_notes(args: argparse.Namespace) -> list[str]:
    """One line for each no-effect flag given, naming its value and why it does nothing here."""
    notes = []
    for flag, why in NO_EFFECT.items():
        for value in getattr(args, _dest(flag)):
            notes.append(f"{flag}={value} has no effect in naiad: {why}")
    return notes


def deprecated_trace_entries(args: argparse.Namespace) -> list[str]:
    """The ``--trace-config`` entries the deprecated flags stand for."""
    return [f"{key}={value}" for flag, key in DEPRECATED_TRACE.items() for value in getattr(args, _dest(flag))]


def deprecated_trace_warnings(args: argparse.Namespace) -> list[str]:
    """Triton's warning for each deprecated tracing flag used."""
    return [
        f"Warning: '{flag}' has been deprecated and will be removed in future releases. Please use "
        f"'--trace-config {_DEPRECATED_TRACE_USE[flag]} instead."
        for flag in DEPRECATED_TRACE
        if getattr(args, _dest(flag))
    ]


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")
