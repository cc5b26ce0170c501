"""The command line of ``naiad-tensorrt build``: parsing and checking it needs no TensorRT.

::

    naiad-tensorrt build model.onnx -o model.plan \\
        --profile 'INPUT0=1x4:8x4:16x4,INPUT1=1x4:8x4:16x4' \\
        --profile 'INPUT0=16x4:32x4:64x4,INPUT1=16x4:32x4:64x4' --fp16

Each ``--profile`` is one optimization profile: for every dynamic input, ``NAME=MIN:OPT:MAX`` with
shapes written ``1x3x224x224`` (a single shape means MIN = OPT = MAX).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InputRange:
    """One input's shapes in one profile."""

    name: str
    min: Shape
    opt: Shape
    max: Shape


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """Everything a build needs, checked."""

    onnx: Path
    output: Path
    profiles: tuple[tuple[InputRange, ...], ...]
    fp16: bool = False
    bf16: bool = False
    workspace_mib: int | None = None
    optimization_level: int | None = None
    progress: bool = True


def parse_shape(text: str) -> Shape:
    """``1x3x224x224`` -> ``(1, 3, 224, 224)``; every dimension a positive integer (``x`` alone: a scalar)."""
    if text.strip() == "x":
        return ()
    parts = text.strip().lower().split("x")
    try:
        dims = tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape '{text}' is not dimensions separated by 'x', e.g. 1x3x224x224"
        ) from None
    if any(dim < 1 for dim in dims):
        raise argparse.ArgumentTypeError(f"shape '{text}' has a dimension below 1; profile shapes are concrete sizes")
    return dims


def parse_profile(text: str) -> tuple[InputRange, ...]:
    """One ``--profile`` value: ``NAME=MIN:OPT:MAX[,NAME=...]``."""
    ranges: list[InputRange] = []
    for item in text.split(","):
        name, sep, shapes = item.strip().rpartition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(
                f"profile entry '{item}' must be INPUT=MIN:OPT:MAX (or INPUT=SHAPE), e.g. INPUT0=1x4:8x4:16x4"
            )
        parts = [parse_shape(part) for part in shapes.split(":")]
        if len(parts) == 1:
            parts *= 3
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(
                f"profile entry '{item}' has {len(parts)} shapes; give MIN:OPT:MAX or one shape"
            )
        low, best, high = parts
        if not len(low) == len(best) == len(high):
            raise argparse.ArgumentTypeError(f"profile entry '{item}': MIN, OPT and MAX must have the same rank")
        if not all(a <= b <= c for a, b, c in zip(low, best, high, strict=True)):
            raise argparse.ArgumentTypeError(f"profile entry '{item}': every dimension must satisfy MIN <= OPT <= MAX")
        if any(existing.name == name for existing in ranges):
            raise argparse.ArgumentTypeError(f"profile '{text}' names input '{name}' twice")
        ranges.append(InputRange(name, low, best, high))
    return tuple(ranges)


def parser(prog: str = "naiad-tensorrt build") -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog=prog,
        description="Build a TensorRT plan (model.plan) from an ONNX model, on this machine's GPU.",
        epilog="Example: %(prog)s model.onnx -o models/m/1/model.plan --profile 'INPUT0=1x4:8x4:16x4' --fp16",
    )
    result.add_argument("onnx", type=Path, help="the ONNX model to build from")
    result.add_argument("-o", "--output", type=Path, help="where to write the plan (default: next to ONNX, .plan)")
    result.add_argument(
        "--profile",
        type=parse_profile,
        action="append",
        default=[],
        metavar="INPUT=MIN:OPT:MAX[,...]",
        help="one optimization profile (repeat for more); shapes like 1x3x224x224, batch dimension included",
    )
    result.add_argument("--fp16", action="store_true", help="allow FP16 kernels (GPUs with fast FP16)")
    result.add_argument("--bf16", action="store_true", help="allow BF16 kernels (TensorRT 9+, Ampere and newer)")
    result.add_argument("--workspace-mib", type=int, help="limit the builder's workspace memory, in MiB")
    result.add_argument(
        "--optimization-level", type=int, choices=range(6), help="builder optimization level 0-5 (TensorRT's default 3)"
    )
    result.add_argument("--no-progress", action="store_true", help="no progress bar")
    return result


def parse_args(argv: Sequence[str], prog: str = "naiad-tensorrt build") -> BuildOptions:
    """The checked options; exits with status 2 and the reason (argparse's way) on a bad command line."""
    arguments = parser(prog)
    args = arguments.parse_args(list(argv))
    if not args.onnx.is_file():
        arguments.error(f"ONNX model '{args.onnx}' not found (give the path to a .onnx file)")
    if args.workspace_mib is not None and args.workspace_mib < 1:
        arguments.error("--workspace-mib must be at least 1")
    output = args.output or args.onnx.with_suffix(".plan")
    if output.resolve() == args.onnx.resolve():
        arguments.error(f"the plan would overwrite the ONNX model '{args.onnx}'; give another path with -o")
    if not output.parent.is_dir():
        arguments.error(f"cannot write the plan to '{output}': folder '{output.parent}' does not exist")
    names = [{entry.name for entry in profile} for profile in args.profile]
    if any(profile != names[0] for profile in names):
        arguments.error("every --profile must list the same inputs (TensorRT needs each dynamic input in each profile)")
    return BuildOptions(
        onnx=args.onnx,
        output=output,
        profiles=tuple(args.profile),
        fp16=args.fp16,
        bf16=args.bf16,
        workspace_mib=args.workspace_mib,
        optimization_level=args.optimization_level,
        progress=not args.no_progress,
    )


def profile_problems(profiles: Sequence[Sequence[InputRange]], inputs: Mapping[str, Shape]) -> list[str]:
    """What is wrong with ``profiles`` for a network whose inputs have ``inputs`` shapes (-1 = dynamic)."""
    problems: list[str] = []
    dynamic = [name for name, shape in inputs.items() if any(dim < 0 for dim in shape)]
    if dynamic and not profiles:
        problems.append(
            "the model has dynamic inputs "
            + ", ".join(f"'{name}' {_text(inputs[name])}" for name in dynamic)
            + "; give their ranges with --profile "
            + ",".join(f"{name}=MIN:OPT:MAX" for name in dynamic)
        )
    for number, profile in enumerate(profiles, 1):
        listed = {entry.name for entry in profile}
        for name in dynamic:
            if name not in listed:
                problems.append(
                    f"--profile {number} does not give a range for dynamic input '{name}' {_text(inputs[name])}"
                )
        for entry in profile:
            shape = inputs.get(entry.name)
            if shape is None:
                problems.append(
                    f"--profile {number} names input '{entry.name}', which the model does not have (inputs:"
                    f" {', '.join(inputs) or 'none'})"
                )
                continue
            if len(entry.min) != len(shape):
                problems.append(
                    f"--profile {number}: input '{entry.name}' has {len(shape)} dimensions {_text(shape)}, the profile"
                    f" gives {len(entry.min)}"
                )
                continue
            for index, dim in enumerate(shape):
                if dim >= 0 and not entry.min[index] == entry.opt[index] == entry.max[index] == dim:
                    problems.append(
                        f"--profile {number}: input '{entry.name}' dimension {index} is fixed at {dim} in the model,"
                        f" so MIN, OPT and MAX must all be {dim} there"
                    )
    return problems


def _text(shape: Shape) -> str:
    return "[" + ",".join(str(dim) for dim in shape) + "]"
