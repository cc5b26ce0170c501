from naiad_llm.stops import StopMatcher


def feed_all(matcher: StopMatcher, pieces: list[str]) -> str:
    text = "".join(matcher.feed(piece) for piece in pieces)
    return text + matcher.flush()


def test_a_stop_string_split_across_pieces_is_cut_and_never_emitted() -> None:
    assert feed_all(StopMatcher(["STOP"]), ["hello S", "T", "OP world"]) == "hello "


def test_a_held_prefix_that_is_no_stop_string_is_emitted() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("go ST") == "go "
    assert matcher.feed("ay") == "STay"
    assert not matcher.stopped


def test_the_earliest_of_several_stop_strings_wins() -> None:
    matcher = StopMatcher(["world", "lo w"])
    assert feed_all(matcher, ["hello world"]) == "hel"
    assert matcher.stopped


def test_held_text_comes_out_at_the_end_and_nothing_after_a_stop() -> None:
    matcher = StopMatcher(["end"])
    assert matcher.feed("the e") == "the "
    assert matcher.flush() == "e"
    stopped = StopMatcher(["x"])
    assert stopped.feed("axb") == "a"
    assert stopped.feed("more") == ""


def test_without_stop_strings_text_passes_through() -> None:
    assert feed_all(StopMatcher([]), ["a", "b"]) == "ab"
