"""The ``naiad-tensorrt`` command: ``naiad-tensorrt build model.onnx -o model.plan [options]``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from naiad_tensorrt import build

USAGE = "usage: naiad-tensorrt build MODEL.onnx [-o model.plan] [--profile ...] [--fp16] [--bf16] (build --help)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    if args[0] != "build":
        print(f"naiad-tensorrt: unknown command '{args[0]}'\n{USAGE}", file=sys.stderr)
        return 2
    return build.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
