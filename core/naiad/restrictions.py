"""Restricted APIs: endpoint groups a client may call only with an agreed header, as in Triton.

``--http-restricted-api=<apis>:<key>=<value>`` and ``--grpc-restricted-protocol=<protocols>:<key>=<value>``
name a comma-separated list of groups (Triton's: ``health``, ``metadata``, ``inference``,
``shared-memory``, ``model-config``, ``model-repository``, ``statistics``, ``trace``, ``logging``) and
the header (gRPC: metadata key ``triton-grpc-protocol-<key>``) and value a call must carry. A group can
be restricted once per protocol.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

GRPC_KEY_PREFIX = "triton-grpc-protocol-"


class ApiGroup(enum.Enum):
    """Triton's restricted-feature categories."""

    HEALTH = "health"
    METADATA = "metadata"
    INFERENCE = "inference"
    SHARED_MEMORY = "shared-memory"
    MODEL_CONFIG = "model-config"
    MODEL_REPOSITORY = "model-repository"
    STATISTICS = "statistics"
    TRACE = "trace"
    LOGGING = "logging"


@dataclass(frozen=True, slots=True)
class Restriction:
    """The header (gRPC: the metadata key, ``triton-grpc-protocol-`` included) and value a restricted
    call must carry."""

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Restrictions:
    """Which API groups of one protocol are restricted, and how."""

    groups: Mapping[ApiGroup, Restriction] = field(default_factory=dict)

    def get(self, group: ApiGroup) -> Restriction | None:
        """How ``group`` is restricted (None: open to anyone)."""
        return self.groups.get(group)


def parse_restrictions(specs: Iterable[str], kind: str, key_prefix: str = "") -> Restrictions:
    """``<groups>:<key>=<value>`` specs; ``kind`` ("api" or "protocol") words the errors, as Triton's."""
    groups: dict[ApiGroup, Restriction] = {}
    for spec in specs:
        names, colon, header = spec.partition(":")
        key, equals, value = header.partition("=")
        if not colon or not names or not key or not equals:
            raise ValueError(f"restricted {kind} setting '{spec}' is not <{kind}s>:<key>=<value>")
        for name in names.split(","):
            try:
                group = ApiGroup(name)
            except ValueError:
                known = ", ".join(group.value for group in ApiGroup)
                raise ValueError(f"unknown restricted {kind} '{name}' (known: {known})") from None
            if group in groups:
                raise ValueError(f"restricted {kind} '{name}' can not be specified in multiple config groups")
            groups[group] = Restriction(key_prefix + key, value)
    return Restrictions(groups)
