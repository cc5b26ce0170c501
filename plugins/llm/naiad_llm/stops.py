"""Stop strings over streamed text: matched across token boundaries, never emitted.

An engine feeds each new piece of decoded text to a :class:`StopMatcher`; it gets back the text that
is safe to emit now. Text that could still be the start of a stop string is held back until the
next piece shows whether it is one.
"""

from __future__ import annotations

from collections.abc import Sequence


class StopMatcher:
    """Cuts a text stream at the first stop string; holds back possible stop-string prefixes."""

    __slots__ = ("_held", "_longest", "_stops", "stopped")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._longest = max((len(stop) for stop in self._stops), default=0)
        self._held = ""
        self.stopped = False  # a stop string was found; nothing more is emitted

    def feed(self, text: str) -> str:
        """Take the next piece of text; return what can be emitted now."""
        if self.stopped:
            return ""
        if not self._stops:
            return text
        window = self._held + text
        cut = min((index for stop in self._stops if (index := window.find(stop)) >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return window[:cut]
        keep = self._partial_suffix(window)
        self._held = window[len(window) - keep :] if keep else ""
        return window[: len(window) - keep]

    def flush(self) -> str:
        """The text held back, at the end of the stream (it was no stop string after all)."""
        held, self._held = ("" if self.stopped else self._held), ""
        return held

    def _partial_suffix(self, window: str) -> int:
        """Length of the longest suffix of ``window`` that is a proper prefix of some stop string."""
        for length in range(min(len(window), self._longest - 1), 0, -1):
            suffix = window[-length:]
            if any(stop.startswith(suffix) for stop in self._stops):
                return length
        return 0
