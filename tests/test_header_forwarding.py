"""The header forward patterns read as Triton reads them: RE2, with ``(?i)`` put in front."""

from __future__ import annotations

import pytest

from naiad.header_forwarding import HeaderForwarding

HEADERS = [("my_header_1", "a"), ("MY_HEADER_2", "b"), ("other", "c")]


@pytest.mark.parametrize(
    ("pattern", "forwarded"),
    [
        ("MY_HEADER.*", {"my_header_1": "a", "MY_HEADER_2": "b"}),  # case ignored, as in Triton
        ("(?-i)MY_HEADER.*", {"MY_HEADER_2": "b"}),  # a leading flag group holds to the end, as in RE2
        ("(?-i)MY_HEADER_2|other", {"MY_HEADER_2": "b", "other": "c"}),
        ("(?:my)_header_1", {"my_header_1": "a"}),
    ],
)
def test_patterns_match_as_in_triton(pattern: str, forwarded: dict[str, str]) -> None:
    assert HeaderForwarding(pattern).parameters({}, HEADERS) == forwarded


def test_a_pattern_that_is_no_regular_expression_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"header forward pattern 'a\(' is not a regular expression"):
        HeaderForwarding("a(")
