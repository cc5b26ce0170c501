"""Which optimization profiles instances use and which one runs a batch."""

from __future__ import annotations

import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad_tensorrt.profiles import choose_profile, instance_profiles, model_profiles, parse_profiles, used_profiles

from .engines import add_sub, config, variable_length


def test_an_instance_runs_the_profiles_its_group_lists_else_all() -> None:
    assert instance_profiles("m", ["1"], 3) == [1]
    assert instance_profiles("m", ["2", "0", "2"], 3) == [2, 0]
    assert instance_profiles("m", [], 3) == [0, 1, 2]


@pytest.mark.parametrize("name", ["3", "-1", "first"])
def test_a_profile_the_engine_lacks_is_refused_by_name(name: str) -> None:
    with pytest.raises(NaiadError) as caught:
        parse_profiles("m", [name], 3)
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message == (
        f"model 'm': instance_group profile '{name}' is not a valid optimization profile: the engine has 3"
        ' profile(s), named "0" to "2"'
    )


def test_model_and_used_profiles() -> None:
    two_groups = config('instance_group [ { profile: [ "1" ] }, { profile: [ "0" ] } ]')
    assert model_profiles(two_groups, 2) == [0, 1]
    assert model_profiles(config("instance_group [ { count: 1 } ]"), 2) == [0]  # Triton's auto-complete default
    assert used_profiles(config('instance_group [ { profile: [ "1" ] } ]'), 2) == [1]
    assert used_profiles(config('instance_group [ { profile: [ "1" ] }, { count: 2 } ]'), 2) == [0, 1]
    assert used_profiles(config(), 2) == [0, 1]


def test_a_batch_runs_on_the_profile_nearest_its_optimal_shapes() -> None:
    engine = add_sub(profiles=((1, 8, 16), (1, 32, 64)))
    assert choose_profile("m", engine, [0, 1], {"INPUT0": (8, 4), "INPUT1": (8, 4)}) == 0
    assert choose_profile("m", engine, [0, 1], {"INPUT0": (16, 4), "INPUT1": (16, 4)}) == 0  # 8 from 8, 16 from 32
    assert choose_profile("m", engine, [0, 1], {"INPUT0": (30, 4), "INPUT1": (30, 4)}) == 1
    assert choose_profile("m", engine, [1], {"INPUT0": (8, 4), "INPUT1": (8, 4)}) == 1  # only profile 1 is listed


def test_shapes_outside_every_profile_are_an_invalid_argument_naming_the_ranges() -> None:
    with pytest.raises(NaiadError) as caught:
        choose_profile("m", variable_length(), [0], {"tokens": (2, 300)})
    assert caught.value.code is ErrorCode.INVALID_ARG
    assert caught.value.message == (
        "model 'm': no optimization profile of this instance accepts the input shapes 'tokens' [2,300] (batch"
        " dimension included); accepted: profile 0: 'tokens' [1,1] to [8,128]. Send shapes within one profile's"
        " range, or rebuild the plan with a profile that covers them"
    )
    with pytest.raises(NaiadError, match="accepts the input shapes 'INPUT0' \\[20,4\\]"):
        choose_profile("m", add_sub(), [0], {"INPUT0": (20, 4), "INPUT1": (20, 4)})
    with pytest.raises(NaiadError, match="accepts the input shapes 'INPUT0' \\[2,5\\]"):
        choose_profile("m", add_sub(), [0, 1], {"INPUT0": (2, 5), "INPUT1": (2, 5)})
