"""Garbage-collector settings for a process that serves: fewer collections, none over the loaded heap.

Every request allocates short-lived containers (dicts, closures, tensor wrappers). With CPython's
default thresholds the cyclic collector runs every 700 net allocations, and now and then walks
every object the process holds: the imported libraries, the loaded models, the configs. Once a
process has loaded what it serves, :func:`settle` collects once, moves every object alive then out
of the collector's sight (:func:`gc.freeze`), and lets the youngest generation grow to
:data:`YOUNG_THRESHOLD` objects between collections, so most request garbage is freed by reference
counting before the collector ever looks at it. Objects loaded later (a model loaded through the
repository API) are collected as usual.

Only processes naiad owns call it (``naiad serve``, python-model workers, engine processes): an
application embedding the server keeps its own collector settings.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Net allocations between two collections of the youngest generation (CPython's default: 700)."""


def settle() -> None:
    """Collect once, freeze what is alive, and collect the youngest generation less often."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
