"""The standard ``grpc.health.v1.Health/Check``: SERVING when the server is ready."""

from __future__ import annotations

from typing import Any

import grpc  # type: ignore[import-untyped,unused-ignore]

from naiad.dataplane import DataPlane
from naiad.grpc import restricted
from naiad.protocol import health_pb2
from naiad.restrictions import ApiGroup, Restrictions

SERVICE = "grpc.health.v1.Health"


def health_handlers(dataplane: DataPlane, restrictions: Restrictions) -> dict[str, Any]:
    """Method name -> handler for the health service (Check only, as in Triton; in the ``health``
    group of ``--grpc-restricted-protocol``)."""
    restriction = restrictions.get(ApiGroup.HEALTH)

    async def check(request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse | None:
        if restricted.refused(restriction, context):
            return None
        status = (
            health_pb2.HealthCheckResponse.SERVING if dataplane.ready() else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        return health_pb2.HealthCheckResponse(status=status)

    return {
        "Check": grpc.unary_unary_rpc_method_handler(
            check,
            request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
        )
    }
