"""The KServe v2 / Triton gRPC frontend (``inference.GRPCInferenceService`` and health)."""

from naiad.grpc.serving import GrpcFrontend, GrpcSettings

__all__ = ["GrpcFrontend", "GrpcSettings"]
