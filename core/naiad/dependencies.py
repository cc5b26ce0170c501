"""Which models a model needs, and the order that loads every model after the ones it needs."""

from __future__ import annotations

from collections.abc import Mapping, Set

from naiad.protocol.model_config_pb2 import ModelConfig


def model_dependencies(config: ModelConfig) -> set[str]:
    """The models ``config`` names as its own parts: an ensemble's steps."""
    return {step.model_name for step in config.ensemble_scheduling.step if step.model_name}


def load_waves(dependencies: Mapping[str, Set[str]]) -> tuple[list[list[str]], dict[str, list[str]]]:
    """Group models into waves that load one after another, each model after what it needs.

    ``dependencies`` maps each model to load to the models it needs; needs outside the mapping are
    ignored (they are not being loaded now). Returns the waves (names sorted within a wave) and, for
    every model on a dependency cycle, the cycle as a path (``a -> b -> a``). Models on a cycle are in
    no wave; models that need one come in the last wave, where they fail on their own terms.
    """
    pending = {name: {need for need in needs if need in dependencies} for name, needs in dependencies.items()}
    waves: list[list[str]] = []
    while True:
        ready = sorted(name for name, needs in pending.items() if not needs)
        if not ready:
            break
        waves.append(ready)
        for name in ready:
            del pending[name]
        for needs in pending.values():
            needs.difference_update(ready)
    cycles = {name: cycle for name in pending if (cycle := _cycle_through(name, pending)) is not None}
    stuck = sorted(name for name in pending if name not in cycles)
    if stuck:
        waves.append(stuck)
    return waves, cycles


def _cycle_through(start: str, needs: Mapping[str, Set[str]]) -> list[str] | None:
    """A path from ``start`` back to itself, if there is one (depth-first, deterministic order)."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        for need in sorted(needs.get(name, ()), reverse=True):
            if need == start:
                return [*path, start]
            if need not in seen:
                seen.add(need)
                stack.append((need, [*path, need]))
    return None
