"""``--grpc-restricted-protocol``: which RPC belongs to which group, and the check Triton makes.

The grouping is Triton's (checked against Triton 2.51): a call to a restricted group without the
agreed metadata ends with UNAVAILABLE before its request is read.
"""

from __future__ import annotations

from typing import Any

import grpc  # type: ignore[import-untyped,unused-ignore]

from naiad.grpc.status import fail
from naiad.restrictions import ApiGroup, Restriction

GROUPS: dict[str, ApiGroup] = {
    "ServerLive": ApiGroup.HEALTH,
    "ServerReady": ApiGroup.HEALTH,
    "ModelReady": ApiGroup.HEALTH,
    "ServerMetadata": ApiGroup.METADATA,
    "ModelMetadata": ApiGroup.METADATA,
    "ModelConfig": ApiGroup.MODEL_CONFIG,
    "ModelInfer": ApiGroup.INFERENCE,
    "ModelStreamInfer": ApiGroup.INFERENCE,
    "ModelStatistics": ApiGroup.STATISTICS,
    "RepositoryIndex": ApiGroup.MODEL_REPOSITORY,
    "RepositoryModelLoad": ApiGroup.MODEL_REPOSITORY,
    "RepositoryModelUnload": ApiGroup.MODEL_REPOSITORY,
    "SystemSharedMemoryStatus": ApiGroup.SHARED_MEMORY,
    "SystemSharedMemoryRegister": ApiGroup.SHARED_MEMORY,
    "SystemSharedMemoryUnregister": ApiGroup.SHARED_MEMORY,
    "CudaSharedMemoryStatus": ApiGroup.SHARED_MEMORY,
    "CudaSharedMemoryRegister": ApiGroup.SHARED_MEMORY,
    "CudaSharedMemoryUnregister": ApiGroup.SHARED_MEMORY,
    "TraceSetting": ApiGroup.TRACE,
    "LogSettings": ApiGroup.LOGGING,
}
"""``inference.GRPCInferenceService`` method -> its group (``grpc.health.v1.Health/Check`` is
``health``)."""


def refused(restriction: Restriction | None, context: Any) -> bool:
    """End the call with Triton's UNAVAILABLE status unless it carries the agreed metadata.

    Metadata keys arrive in lower case, so the key is compared in lower case; the value exactly.
    """
    if restriction is None:
        return False
    key = restriction.key.lower()
    if any(entry[0] == key and entry[1] == restriction.value for entry in context.invocation_metadata() or ()):
        return False
    fail(context, grpc.StatusCode.UNAVAILABLE, f"This protocol is restricted, expecting header '{restriction.key}'")
    return True
