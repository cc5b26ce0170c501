"""Triton's rate limiter: instances execute only while the resources they declare are free.

Off by default, as in Triton (``--rate-limit=off``). With ``--rate-limit=execution_count`` an
instance whose group declares ``rate_limiter { resources [...] priority: N }`` waits before each
execution until its resources are available; among waiting instances, those with a lower
``priority`` value get proportionally more turns (priority 2 gets half the turns of priority 1).
Resource totals come from ``--rate-limit-resource=<name>:<count>[:<device>]`` (without a device:
the global resource's count, and each device's), or default to the largest amount any single
instance asks for.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

GLOBAL_DEVICE = -1

ResourceKey = tuple[str, int]  # (name, device); device GLOBAL_DEVICE for global resources


@dataclass(frozen=True, slots=True)
class ResourceNeeds:
    """What one instance must hold while it executes, and its scheduling weight."""

    amounts: Mapping[ResourceKey, int]
    priority: int = 1


@dataclass(slots=True, eq=False)
class _Waiter:
    needs: ResourceNeeds
    served: int = 0
    waiting: bool = False
    turn: threading.Event = field(default_factory=threading.Event)


class RateLimiter:
    """Hands out resources to instances, one execution at a time, weighted by priority."""

    def __init__(self, explicit: Mapping[ResourceKey, int]) -> None:
        self._explicit = dict(explicit)
        self._totals = dict(explicit)
        self._free = dict(explicit)
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []

    def register(self, needs: ResourceNeeds, model: str) -> _Waiter:
        """Add an instance; resources not set on the command line grow to what it needs."""
        with self._lock:
            for (name, device), amount in needs.amounts.items():
                key = (name, device)
                every_device = self._explicit.get((name, GLOBAL_DEVICE))
                if key not in self._explicit and every_device is not None:
                    # as Triton, a --rate-limit-resource without a device counts for each device
                    self._explicit[key] = self._totals[key] = self._free[key] = every_device
                total = self._totals.get(key, 0)
                if key in self._explicit and amount > total:
                    where = "global" if device == GLOBAL_DEVICE else f"device {device}"
                    raise ValueError(
                        f"model '{model}' needs {amount} of rate-limiter resource '{name}' ({where}) but only "
                        f"{total} exist; raise it with --rate-limit-resource={name}:{amount}"
                    )
                if amount > total:
                    self._free[key] = self._free.get(key, 0) + amount - total
                    self._totals[key] = amount
            waiter = _Waiter(needs)
            self._waiters.append(waiter)
            return waiter

    def unregister(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.remove(waiter)

    def acquire(self, waiter: _Waiter) -> None:
        """Block until it is this instance's turn and its resources are taken."""
        with self._lock:
            waiter.waiting = True
            waiter.turn.clear()
            self._grant()
        waiter.turn.wait()

    def release(self, waiter: _Waiter) -> None:
        with self._lock:
            for key, amount in waiter.needs.amounts.items():
                self._free[key] = self._free.get(key, 0) + amount
            self._grant()

    def _grant(self) -> None:
        """Give turns to waiting instances whose resources fit, fewest weighted turns first."""
        candidates = sorted(
            (waiter for waiter in self._waiters if waiter.waiting),
            key=lambda waiter: waiter.served * max(waiter.needs.priority, 1),
        )
        for waiter in candidates:
            if all(self._free.get(key, 0) >= amount for key, amount in waiter.needs.amounts.items()):
                for key, amount in waiter.needs.amounts.items():
                    self._free[key] = self._free.get(key, 0) - amount
                waiter.waiting = False
                waiter.served += 1
                waiter.turn.set()


def parse_resource(text: str) -> tuple[ResourceKey, int]:
    """``name:count[:device]`` from the command line."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(f"expected <name>:<count>[:<device>], got '{text}'")
    device = int(parts[2]) if len(parts) == 3 else GLOBAL_DEVICE
    return (parts[0], device), int(parts[1])
