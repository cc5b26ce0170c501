"""The order in which Triton walks a request's inputs (and an ensemble's outputs).

Triton keeps a request's inputs in a ``std::unordered_map<std::string, Input>`` filled in request
order, and walks that map to check them and to list them in errors. With libstdc++ (which Triton's
builds use) the walk follows the map's node chain: a key goes to the front of its bucket's run, or
to the front of the chain when its bucket is empty, and a rehash relinks the chain the same way.
:func:`map_order` replays that, so naiad names the same input first when several are wrong
("Got input(s) ['X','INPUT1','INPUT0']"), and lists an ensemble's outputs in its responses in the
order Triton does. It runs only on the error path and once per ensemble load.
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK = (1 << 64) - 1
_MUL = 0xC6A4A7935BD1E995  # libstdc++'s _Hash_bytes (64-bit MurmurHash2)
_SEED = 0xC70F6907  # std::hash<std::string>'s seed
# The bucket counts an unordered_map grows through (libstdc++'s prime rehash policy, load factor 1):
# the first insertion makes 13 buckets, and a map that would hold more than its buckets grows.
_BUCKET_COUNTS = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061)


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def string_hash(text: str) -> int:
    """``std::hash<std::string>`` of ``text``'s UTF-8 bytes, as libstdc++ computes it on 64-bit hosts."""
    data = text.encode("utf-8", "surrogateescape")
    length = len(data)
    aligned = length & ~7
    value = _SEED ^ ((length * _MUL) & _MASK)
    for start in range(0, aligned, 8):
        word = (_shift_mix((int.from_bytes(data[start : start + 8], "little") * _MUL) & _MASK) * _MUL) & _MASK
        value = ((value ^ word) * _MUL) & _MASK
    if length & 7:
        value = ((value ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _MASK
    return _shift_mix((_shift_mix(value) * _MUL) & _MASK)


def _bucket_count(size: int) -> int:
    return next((count for count in _BUCKET_COUNTS if count >= size), size)


class _Chain:
    """A map's node chain as runs of nodes that share a bucket: a node goes first in its bucket's run,
    and a bucket's first node starts a run at the front of the chain."""

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self._runs: dict[int, list[int]] = {}  # by bucket, oldest run first, each run oldest node first

    def link(self, index: int, code: int) -> None:
        self._runs.setdefault(code % self.buckets, []).append(index)

    def walk(self) -> list[int]:
        return [index for run in reversed(self._runs.values()) for index in reversed(run)]


def map_order(names: Sequence[str]) -> list[int]:
    """The positions of ``names`` (distinct, in request order) in the order Triton walks them."""
    codes = [string_hash(name) for name in names]
    chain = _Chain(0)
    for index, code in enumerate(codes):
        if index + 1 > chain.buckets:  # the map grows, relinking its chain, before it links the new node
            grown = _Chain(_bucket_count(index + 1))
            for moved in chain.walk():
                grown.link(moved, codes[moved])
            chain = grown
        chain.link(index, code)
    return chain.walk()
