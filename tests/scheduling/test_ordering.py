"""The OrderedRelease pipeline stage delivers each request's events only after earlier requests finished."""

from __future__ import annotations

from naiad.backend import InferenceResponse, ResponseEvent, ResponseSender
from naiad.pipeline import build_pipeline
from naiad.scheduling.ordering import OrderedRelease


def test_later_events_wait_for_the_earlier_final() -> None:
    delivered: list[tuple[str, bool]] = []
    release = OrderedRelease()
    senders = {}
    for name in ("a", "b", "c"):
        sender = ResponseSender(
            lambda event, name=name: delivered.append((name, event.final)), build_pipeline([release])
        )
        release.register(sender)
        senders[name] = sender
    senders["c"].send(InferenceResponse(), final=True)
    senders["b"].send(InferenceResponse())
    assert delivered == []
    senders["a"].send(InferenceResponse())
    assert delivered == [("a", False)]
    senders["a"].send(None, final=True)
    assert delivered == [("a", False), ("a", True), ("b", False)]
    senders["b"].send(InferenceResponse(), final=True)
    assert delivered == [("a", False), ("a", True), ("b", False), ("b", True), ("c", True)]


def test_events_of_the_current_request_pass_straight_through() -> None:
    delivered: list[ResponseEvent] = []
    release = OrderedRelease()
    sender = ResponseSender(delivered.append, build_pipeline([release]))
    release.register(sender)
    for _ in range(3):
        sender.send(InferenceResponse())
    assert len(delivered) == 3
