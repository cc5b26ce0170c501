"""Build a wheel and an sdist of each naiad distribution into one folder, quietly.

Usage: ``python scripts/build_distributions.py --outdir dist . plugins/python ...`` (``make dist``
passes the repository root and every ``plugins/*`` folder).

Each folder is built with ``python -m build``: an isolated build environment, the sdist first and
the wheel from that sdist, so an sdist that misses a file fails here rather than on a user's
machine. One line is printed per distribution; a build that fails prints its whole log and the
folder it was building, and the script exits 1.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def build(project: Path, outdir: Path) -> list[Path]:
    """Build ``project``'s sdist and wheel into ``outdir``; returns the new files.

    Raises ``RuntimeError`` with the build's log when it fails.
    """
    before = set(outdir.glob("*")) if outdir.is_dir() else set()
    command = [sys.executable, "-m", "build", "--outdir", str(outdir), str(project)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"building {project} failed (exit {result.returncode}); its log:\n{result.stdout}{result.stderr}\n"
            f"Run `{' '.join(command)}` to build it alone."
        )
    return sorted(set(outdir.glob("*")) - before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("projects", nargs="+", type=Path, help="folders holding a pyproject.toml")
    parser.add_argument("--outdir", type=Path, default=Path("dist"), help="where the files go (default: dist)")
    args = parser.parse_args(argv)
    for project in args.projects:
        try:
            built = build(project, args.outdir)
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return 1
        print("built " + " and ".join(str(path) for path in built))
    return 0


if __name__ == "__main__":
    sys.exit(main())
