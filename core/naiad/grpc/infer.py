"""ModelInfer: a ModelInferRequest resolved to its model version and decoded."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.dataplane import DataPlane
from naiad.grpc import codec
from naiad.grpc.messages import Encoded, InferRequestMessage
from naiad.models import ServingModel
from naiad.protocol import grpc_service_pb2 as pb
from naiad.tracing import FrontendTiming

DECOUPLED_ON_UNARY = "ModelInfer RPC doesn't support models with decoupled transaction policy"


@dataclass(slots=True)
class GrpcRequest:
    """A decoded request and the model version that serves it; nothing is queued yet."""

    message: pb.ModelInferRequest  # without its raw contents, which are decoded
    model: ServingModel
    decoded: codec.DecodedRequest

    @property
    def decoupled(self) -> bool:
        return self.model.signature.decoupled

    def bare_response(self) -> pb.ModelInferResponse:
        """A response with no outputs naming the request's id, model and version string, as
        Triton sends on stream errors and empty final responses."""
        return pb.ModelInferResponse(
            id=self.message.id, model_name=self.message.model_name, model_version=self.message.model_version
        )


def decode(dataplane: DataPlane, received: InferRequestMessage, *, unary: bool) -> GrpcRequest:
    """Resolve the model and decode the request (its inputs copied out of the received message);
    nothing is validated or queued yet.

    A unary ModelInfer refuses decoupled models before looking at the inputs, as Triton does.
    """
    message = received.message
    model = dataplane.service.resolve(
        message.model_name,
        codec.parse_version(message.model_version),
        refuse_decoupled=DECOUPLED_ON_UNARY if unary else None,
    )
    decoded = codec.decode_request(message, received.raw, model.name, model.signature, dataplane.shared_memory)
    return GrpcRequest(message, model, decoded)


async def model_infer(
    dataplane: DataPlane, request: GrpcRequest, max_message_size: int, frontend: FrontendTiming | None = None
) -> Encoded:
    """Run a unary ModelInfer; cancelling the awaiting task cancels the request."""
    decoded = request.decoded
    response = await dataplane.infer(
        request.model,
        decoded.inputs,
        outputs=decoded.outputs,
        request_id=decoded.id,
        parameters=decoded.parameters,
        frontend=frontend,
    )
    decoded.inputs.clear()  # done with: their memory can go before the outputs are serialized
    encoded = codec.encode_response(
        response,
        model_name=request.model.name,
        model_version=str(request.model.version),
        request_id=request.message.id,
        in_shared_memory=decoded.in_shared_memory,
    )
    codec.check_size(encoded.size, max_message_size)
    return encoded
