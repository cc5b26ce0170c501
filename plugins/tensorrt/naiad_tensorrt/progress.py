"""A text progress bar for TensorRT's build phases (fed by ``trt.IProgressMonitor`` during a build)."""

from __future__ import annotations

import sys
from typing import TextIO

WIDTH = 30


class BuildProgress:
    """Renders the innermost running phase as ``name [#####.....] step/total`` on one rewritten line."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.phases: dict[str, tuple[int, int]] = {}  # phase -> (steps done, total)
        self.order: list[str] = []

    def start(self, phase: str, total: int) -> None:
        self.phases[phase] = (0, max(total, 0))
        self.order.append(phase)
        self._draw(phase)

    def step(self, phase: str, step: int) -> None:
        if phase in self.phases:
            self.phases[phase] = (step + 1, self.phases[phase][1])
            self._draw(phase)

    def finish(self, phase: str) -> None:
        self.phases.pop(phase, None)
        if phase in self.order:
            self.order.remove(phase)
        if not self.order:
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._draw(self.order[-1])

    def line(self, phase: str) -> str:
        done, total = self.phases[phase]
        filled = WIDTH * done // total if total else WIDTH
        depth = "  " * (len(self.order) - 1)
        return f"{depth}{phase} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}"

    def _draw(self, phase: str) -> None:
        self.stream.write("\r\x1b[2K" + self.line(phase))
        self.stream.flush()
