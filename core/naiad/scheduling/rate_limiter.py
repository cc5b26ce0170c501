"""Triton's rate limiter: instances execute only while the resources they declare are free.

Off by default, as in Triton (``--rate-limit=off``). With ``--rate-limit=execution_count`` an
instance whose group declares ``rate_limiter { resources [...] priority: N }`` waits before each
execution until its resources are available; the turn goes to the waiting instance with the fewest
executions times its ``priority`` (priority 2 gets half the turns of priority 1), counting two for
each instance before its first (Triton counts an instance's initialization and warmup), and among
equals to the one that has waited longest. An instance that
finished an execution and has more work competes for the next turn with those already waiting, as
Triton re-stages an instance whose model has requests queued: it keeps its resources until it asks
again (:meth:`RateLimiter.release` with ``keep``) or finds no work (:meth:`RateLimiter.end_turn`).
Resource totals come from ``--rate-limit-resource=<name>:<count>[:<device>]`` (without a device:
the global resource's count, and each device's; once any is given, a resource it does not name has
none), or, with none given, default to the largest amount any single instance asks for.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from naiad.errors import ErrorCode, NaiadError

GLOBAL_DEVICE = -1

ResourceKey = tuple[str, int]  # (name, device); device GLOBAL_DEVICE for global resources


@dataclass(frozen=True, slots=True)
class ResourceNeeds:
    """What one instance must hold while it executes, and its scheduling weight."""

    amounts: Mapping[ResourceKey, int]
    priority: int = 1


_EXECUTIONS_BEFORE_SERVING = 2
"""What Triton 2.51's limiter counts for an instance before its first request (checked side by side:
two busy models of priority 1 and 3 run 1, 1, 1, 1, 3, 1, 3, 3, 3 on both servers)."""


@dataclass(slots=True, eq=False)
class _Waiter:
    needs: ResourceNeeds
    executions: int = _EXECUTIONS_BEFORE_SERVING
    waiting: bool = False
    waiting_since: int = 0  # when it asked for its turn, in the limiter's own count of asks
    kept: bool = False  # still holds the resources of its last execution
    turn: threading.Event = field(default_factory=threading.Event)


class RateLimiter:
    """Hands out resources to instances, one execution at a time, weighted by priority."""

    def __init__(self, explicit: Mapping[ResourceKey, int]) -> None:
        self._explicit = dict(explicit)
        self._totals: dict[ResourceKey, int] = {}
        self._free: dict[ResourceKey, int] = {}
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._asks = 0

    def register(self, needs: ResourceNeeds, model: str) -> _Waiter:
        """Add an instance. Without ``--rate-limit-resource`` a resource grows to the most any instance
        needs; with it, as in Triton, a resource it does not name has none (INVALID_ARG when needed)."""
        with self._lock:
            for (name, device), amount in needs.amounts.items():
                self._check_scope(name, device, needs)
                key = (name, device)
                if self._explicit:
                    if key not in self._totals:
                        self._totals[key] = self._free[key] = self._explicit_count(name, device)
                    if amount > self._totals[key]:
                        raise _too_few(name, self._totals[key], amount, model)
                elif amount > self._totals.get(key, 0):
                    self._free[key] = self._free.get(key, 0) + amount - self._totals.get(key, 0)
                    self._totals[key] = amount
            waiter = _Waiter(needs)
            self._waiters.append(waiter)
            return waiter

    def _explicit_count(self, name: str, device: int) -> int:
        """What the command line gives resource ``name``: for a global resource the most it gives on any
        device; for one of a device, that device's count or the count given without a device."""
        if device == GLOBAL_DEVICE:
            return max((count for (named, _), count in self._explicit.items() if named == name), default=0)
        return max(self._explicit.get((name, device), 0), self._explicit.get((name, GLOBAL_DEVICE), 0))

    def _check_scope(self, name: str, device: int, needs: ResourceNeeds) -> None:
        """A resource is global or per device, never both (Triton's INVALID_ARG)."""
        is_global = device == GLOBAL_DEVICE
        for other in (needs, *(waiter.needs for waiter in self._waiters)):
            if any(named == name and (at == GLOBAL_DEVICE) != is_global for named, at in other.amounts):
                raise NaiadError(
                    f'Resource "{name}" is present as both global and device-specific resource in the model '
                    "configuration.",
                    ErrorCode.INVALID_ARG,
                )

    def unregister(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.remove(waiter)
            self._end_turn(waiter)

    def acquire(self, waiter: _Waiter) -> None:
        """Block until it is this instance's turn and its resources are taken; resources it kept
        from its last execution are put up for this turn, which it may win again."""
        with self._lock:
            if waiter.kept:
                self._give_back(waiter)
            waiter.waiting = True
            self._asks += 1
            waiter.waiting_since = self._asks
            waiter.turn.clear()
            self._grant()
        waiter.turn.wait()

    def release(self, waiter: _Waiter, *, keep: bool = False) -> None:
        """An execution ended. With ``keep`` the instance looks for its next batch at once and keeps
        its resources until it asks for a turn again or calls :meth:`end_turn`."""
        with self._lock:
            if keep:
                waiter.kept = True
            else:
                self._give_back(waiter)
                self._grant()

    def end_turn(self, waiter: _Waiter) -> None:
        """The instance found no work: give back the resources it kept."""
        with self._lock:
            self._end_turn(waiter)

    def _end_turn(self, waiter: _Waiter) -> None:
        if waiter.kept:
            self._give_back(waiter)
            self._grant()

    def _give_back(self, waiter: _Waiter) -> None:
        waiter.kept = False
        for key, amount in waiter.needs.amounts.items():
            self._free[key] = self._free.get(key, 0) + amount

    def _grant(self) -> None:
        """Give turns to waiting instances whose resources fit: fewest weighted executions first, then the
        longest waiting."""
        candidates = sorted(
            (waiter for waiter in self._waiters if waiter.waiting),
            key=lambda waiter: (waiter.executions * max(waiter.needs.priority, 1), waiter.waiting_since),
        )
        for waiter in candidates:
            if all(self._free.get(key, 0) >= amount for key, amount in waiter.needs.amounts.items()):
                for key, amount in waiter.needs.amounts.items():
                    self._free[key] = self._free.get(key, 0) - amount
                waiter.waiting = False
                waiter.executions += 1
                waiter.turn.set()


def parse_resource(text: str) -> tuple[ResourceKey, int]:
    """``name:count[:device]`` from the command line."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(f"expected <name>:<count>[:<device>], got '{text}'")
    if not all(part.isdigit() for part in parts[1:]):
        raise ValueError(f"the count and the device must be whole numbers, got '{text}'")
    device = int(parts[2]) if len(parts) == 3 else GLOBAL_DEVICE
    return (parts[0], device), int(parts[1])


def _too_few(name: str, total: int, amount: int, model: str) -> NaiadError:
    """Triton's error for an instance needing more of a resource than the command line gives."""
    return NaiadError(
        f'Resource count for "{name}" is limited to {total} which will prevent scheduling of one or more model '
        f"instances, the minimum required count is {amount} (model '{model}'; raise it with "
        f"--rate-limit-resource={name}:{amount})",
        ErrorCode.INVALID_ARG,
    )
