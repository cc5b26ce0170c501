"""Triton's order of a request's inputs, replayed: what Triton 2.51 listed, and what libstdc++ gives."""

from __future__ import annotations

import pytest

from naiad.hash_order import map_order, string_hash


def test_the_string_hash_is_libstdcxx_std_hash() -> None:
    assert string_hash("INPUT0") == 2526639154658133543  # std::hash<std::string>{}("INPUT0"), g++ 12, x86-64


@pytest.mark.parametrize(
    ("request_order", "triton_order"),
    [  # "Got input(s) [...]" as Triton 2.51 listed the inputs of these requests
        (["INPUT0", "INPUT1", "X"], ["X", "INPUT1", "INPUT0"]),
        (["X", "INPUT0", "INPUT1"], ["INPUT1", "INPUT0", "X"]),
        (["A", "B", "C"], ["B", "C", "A"]),
        (["INPUT0", "INPUT1", "X", "Y"], ["Y", "X", "INPUT1", "INPUT0"]),
    ],
)
def test_inputs_are_walked_in_tritons_order(request_order: list[str], triton_order: list[str]) -> None:
    assert [request_order[index] for index in map_order(request_order)] == triton_order


def test_the_order_survives_the_map_growing() -> None:
    """Sixteen names pass the 13 buckets a map starts with; the order libstdc++'s map walks them in."""
    names = [f"in{number}" for number in range(16)]
    walked = [names[index] for index in map_order(names)]
    expected = "in14 in1 in13 in2 in3 in8 in5 in0 in6 in7 in4 in10 in9 in11 in15 in12"
    assert walked == expected.split()


def test_one_name_and_none() -> None:
    assert map_order(["only"]) == [0]
    assert map_order([]) == []
