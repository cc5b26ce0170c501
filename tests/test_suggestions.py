"""'Did you mean': close names, closest first, in their own spelling."""

from __future__ import annotations

from naiad.suggestions import close_matches, did_you_mean


def test_close_matches_are_closest_first_and_keep_their_spelling() -> None:
    assert close_matches("max_batch_sise", ["name", "max_batch_size", "batch_input"]) == ("max_batch_size",)
    assert close_matches("input0", ["INPUT0", "OUTPUT0"]) == ("INPUT0", "OUTPUT0")


def test_nothing_close_and_the_name_itself_are_not_offered() -> None:
    assert close_matches("tensorflow", ["python", "identity"]) == ()
    assert close_matches("python", ["python"]) == ()


def test_did_you_mean() -> None:
    assert did_you_mean(()) == ""
    assert did_you_mean(("a",)) == "did you mean 'a'?"
    assert did_you_mean(("a", "b")) == "did you mean 'a' or 'b'?"
