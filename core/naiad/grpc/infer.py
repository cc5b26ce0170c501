"""ModelInfer: a ModelInferRequest bound to its model version and prepared on the data plane."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.dataplane import DataPlane, PreparedRequest
from naiad.errors import unsupported
from naiad.grpc import codec
from naiad.models import ModelVersion
from naiad.protocol import grpc_service_pb2 as pb

DECOUPLED_ON_UNARY = "ModelInfer RPC doesn't support models with decoupled transaction policy"


@dataclass(slots=True)
class GrpcRequest:
    """A validated request, ready for :meth:`DataPlane.stream` or :meth:`DataPlane.infer`."""

    message: pb.ModelInferRequest
    model: ModelVersion
    prepared: PreparedRequest
    enable_empty_final: bool

    @property
    def decoupled(self) -> bool:
        assert self.model.signature is not None
        return self.model.signature.decoupled

    def bare_response(self) -> pb.ModelInferResponse:
        """A response with no outputs naming the request's id, model and version string, as
        Triton sends on stream errors and empty final responses."""
        return pb.ModelInferResponse(
            id=self.message.id, model_name=self.message.model_name, model_version=self.message.model_version
        )


def prepare(dataplane: DataPlane, message: pb.ModelInferRequest, *, unary: bool) -> GrpcRequest:
    """Look the model up, decode the request and validate it; nothing is queued yet.

    A unary ModelInfer refuses decoupled models before looking at the inputs, as Triton does.
    """
    model = dataplane.lifecycle.lookup(message.model_name, codec.parse_version(message.model_version))
    assert model.signature is not None
    if unary and model.signature.decoupled:
        raise unsupported(DECOUPLED_ON_UNARY)
    decoded = codec.decode_request(message, model.name)
    prepared = dataplane.prepare(
        model, decoded.inputs, decoded.outputs, request_id=decoded.id, parameters=decoded.parameters
    )
    return GrpcRequest(message, model, prepared, decoded.enable_empty_final)


async def model_infer(dataplane: DataPlane, message: pb.ModelInferRequest) -> pb.ModelInferResponse:
    """Run a unary ModelInfer; cancelling the awaiting task cancels the request."""
    request = prepare(dataplane, message, unary=True)
    response = await dataplane.infer(request.prepared)
    return codec.encode_response(
        response,
        model_name=request.model.name,
        model_version=str(request.model.version),
        request_id=message.id,
    )
