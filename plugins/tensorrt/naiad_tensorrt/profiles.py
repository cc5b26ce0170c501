"""Which optimization profiles a model and an instance use, and which one runs a batch.

Triton names profiles in ``instance_group { profile: [ "0", "1" ] }`` by their index in the
engine. An instance gets one execution context per listed profile (every profile of the engine when
none is listed); each batch runs on the context whose profile accepts the batch's input shapes and
is nearest (Manhattan distance) to the profile's optimal shapes, as Triton picks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from naiad.backend import ErrorCode, ModelConfig, NaiadError, invalid_arg
from naiad_tensorrt.description import EngineDescription, shape_text


def parse_profiles(model: str, names: Sequence[str], num_profiles: int) -> list[int]:
    """The engine profile indices ``names`` lists (no duplicates, in order); INVALID_ARG for bad names."""
    indices: list[int] = []
    for name in names:
        try:
            index = int(name)
        except ValueError:
            index = -1
        if not 0 <= index < num_profiles:
            raise NaiadError(
                f"model '{model}': instance_group profile '{name}' is not a valid optimization profile: the"
                f' engine has {num_profiles} profile(s), named "0" to "{num_profiles - 1}"',
                ErrorCode.INVALID_ARG,
            )
        if index not in indices:
            indices.append(index)
    return indices


def instance_profiles(model: str, names: Sequence[str], num_profiles: int) -> list[int]:
    """The profiles an instance runs: those its group lists, else every profile of the engine."""
    return parse_profiles(model, names, num_profiles) if names else list(range(max(num_profiles, 1)))


def model_profiles(config: ModelConfig, num_profiles: int) -> list[int]:
    """Profiles any instance group lists, else profile 0: Triton's auto-complete takes max_batch_size from these."""
    indices: list[int] = []
    for group in config.instance_group:
        for index in parse_profiles(config.name, list(group.profile), num_profiles):
            if index not in indices:
                indices.append(index)
    return sorted(indices) or [0]


def used_profiles(config: ModelConfig, num_profiles: int) -> list[int]:
    """Every profile some instance will run (all of them when a group lists none)."""
    listed = [list(group.profile) for group in config.instance_group] or [[]]
    used: set[int] = set()
    for names in listed:
        used.update(instance_profiles(config.name, names, num_profiles))
    return sorted(used)


def choose_profile(
    model: str, engine: EngineDescription, profiles: Sequence[int], shapes: Mapping[str, Sequence[int]]
) -> int:
    """The profile (of ``profiles``) that runs a batch with input ``shapes``; INVALID_ARG when none accepts them."""
    best: int | None = None
    best_distance = 0
    for profile in profiles:
        distance = 0
        for name, shape in shapes.items():
            allowed = engine.profile_shape(profile, name)
            if not allowed.accepts(shape):
                break
            distance += allowed.distance(shape)
        else:
            if best is None or distance < best_distance:
                best, best_distance = profile, distance
    if best is not None:
        return best
    ranges = "; ".join(
        f"profile {profile}: "
        + ", ".join(
            f"'{name}' {shape_text(engine.profile_shape(profile, name).min)} to"
            f" {shape_text(engine.profile_shape(profile, name).max)}"
            for name in shapes
        )
        for profile in profiles
    )
    given = ", ".join(f"'{name}' {shape_text(shape)}" for name, shape in shapes.items())
    raise invalid_arg(
        f"model '{model}': no optimization profile of this instance accepts the input shapes {given} (batch"
        f" dimension included); accepted: {ranges}. Send shapes within one profile's range, or rebuild the plan"
        " with a profile that covers them"
    )
