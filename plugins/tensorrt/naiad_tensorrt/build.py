"""``naiad-tensorrt build`` / ``python -m naiad_tensorrt.build``: an ONNX model to a TensorRT plan.

Parses the ONNX file with TensorRT's ONNX parser, adds the optimization profiles given with
``--profile``, allows FP16/BF16 kernels when asked and the TensorRT version and GPU allow them,
shows a progress bar while TensorRT builds, and writes the serialized plan.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from naiad.backend import NaiadError, gpu_count
from naiad_tensorrt.build_options import BuildOptions, parse_args, profile_problems
from naiad_tensorrt.environment import import_tensorrt
from naiad_tensorrt.progress import BuildProgress


class BuildError(Exception):
    """A build that cannot go on; the message says what to do."""


def main(argv: Sequence[str] | None = None, prog: str = "naiad-tensorrt build") -> int:
    """Build the plan; 0 on success, 1 with the reason on stderr when the build fails, 2 for a bad command line."""
    options = parse_args(sys.argv[1:] if argv is None else argv, prog)
    try:
        trt = host_requirements()
        build_plan(trt, options)
    except BuildError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {options.output} from {options.onnx}", file=sys.stderr)
    return 0


def host_requirements() -> Any:
    """TensorRT, on a machine with a GPU; BuildError listing everything missing otherwise."""
    problems = []
    trt = None
    try:
        trt = import_tensorrt("building a plan")
    except NaiadError as error:
        problems.append(error.message)
    if gpu_count() == 0:
        problems.append(
            "building a plan needs an NVIDIA GPU (TensorRT tunes the plan for the GPU it runs on), and this machine"
            " has no CUDA device visible; build on the machine, or the same GPU model, that will serve the plan"
        )
    if problems:
        raise BuildError("; ".join(problems))
    return trt


def build_plan(trt: Any, options: BuildOptions) -> None:
    """Parse, configure, build and write the plan."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(options.onnx)):
        errors = "; ".join(str(parser.get_error(index)) for index in range(parser.num_errors))
        raise BuildError(f"TensorRT's ONNX parser could not read '{options.onnx}': {errors or 'no reason given'}")
    inputs = {
        network.get_input(index).name: tuple(int(dim) for dim in network.get_input(index).shape)
        for index in range(network.num_inputs)
    }
    problems = profile_problems(options.profiles, inputs)
    if problems:
        raise BuildError("; ".join(problems))
    config = builder.create_builder_config()
    for number, profile in enumerate(options.profiles, 1):
        optimization_profile = builder.create_optimization_profile()
        for entry in profile:
            optimization_profile.set_shape(entry.name, entry.min, entry.opt, entry.max)
        if config.add_optimization_profile(optimization_profile) < 0:
            raise BuildError(f"TensorRT refused --profile {number}; its messages above say why")
    _precision(trt, builder, config, options)
    if options.workspace_mib is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mib << 20)
    if options.optimization_level is not None:
        config.builder_optimization_level = options.optimization_level
    if options.progress and hasattr(trt, "IProgressMonitor"):
        config.progress_monitor = _monitor(trt, BuildProgress())
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError(
            f"TensorRT {trt.__version__} failed to build a plan from '{options.onnx}'; its errors are above"
        )
    options.output.write_bytes(bytes(memoryview(serialized)))


def _precision(trt: Any, builder: Any, config: Any, options: BuildOptions) -> None:
    if options.fp16:
        if not builder.platform_has_fast_fp16:
            raise BuildError("--fp16: this GPU has no fast FP16; build without --fp16")
        config.set_flag(trt.BuilderFlag.FP16)
    if options.bf16:
        if not hasattr(trt.BuilderFlag, "BF16"):
            raise BuildError(f"--bf16 needs TensorRT 9 or later; this is TensorRT {trt.__version__}")
        config.set_flag(trt.BuilderFlag.BF16)


def _monitor(trt: Any, progress: BuildProgress) -> Any:
    """A ``trt.IProgressMonitor`` that draws ``progress``."""

    class _Monitor(trt.IProgressMonitor):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            progress.start(phase_name, num_steps)

        def step_complete(self, phase_name: str, step: int) -> bool:
            progress.step(phase_name, step)
            return True

        def phase_finish(self, phase_name: str) -> None:
            progress.finish(phase_name)

    return _Monitor()


if __name__ == "__main__":
    sys.exit(main(prog="python -m naiad_tensorrt.build"))
