"""The ``inference.GRPCInferenceService`` handlers over the data plane.

Handlers are registered for every method of the service descriptor: the ones naiad
implements here, and for the others an UNIMPLEMENTED status that names the RPC.
A :class:`~naiad.errors.NaiadError` becomes the gRPC status of its code (see
:mod:`naiad.grpc.status`) with the error's message as details; a call to a restricted group
(``--grpc-restricted-protocol``) without the agreed metadata ends with UNAVAILABLE first.

Errors end a call by setting its status and returning, never by raising (``context.abort``): an
exception raised there would keep the request, its tensors and the call in a reference cycle until
the next garbage collection. ModelInfer and ModelStreamInfer take their messages as bytes (see
:mod:`naiad.grpc.messages`), and ModelInfer reads its one message itself (it is registered as
stream-unary, which is the same on the wire), so that nothing but its tensors outlives decoding.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc  # type: ignore[import-untyped,unused-ignore]
from google.protobuf import json_format, message_factory
from google.protobuf.message import Message

from naiad import trace_settings
from naiad.dataplane import DataPlane, ServerState, refuse_named_repository
from naiad.errors import NaiadError, invalid_arg
from naiad.grpc import codec, infer, messages, restricted
from naiad.grpc.arenas import trim_after_call
from naiad.grpc.status import fail, grpc_status
from naiad.grpc.stream import StreamSession
from naiad.header_forwarding import with_headers
from naiad.limits import GrpcLimits
from naiad.logs import log_unexpected
from naiad.memory import trim_soon
from naiad.overrides import FILE_PREFIX
from naiad.protocol import grpc_service_pb2 as pb
from naiad.restrictions import Restriction, Restrictions
from naiad.service import SHUTTING_DOWN
from naiad.shared_memory import CUDA, SYSTEM
from naiad.tracing import FrontendTiming

logger = logging.getLogger(__name__)

SERVICE = "inference.GRPCInferenceService"

Unary = Callable[[Any], Awaitable[Message]]
Handler = Callable[[Any, Any], Awaitable[Message | bytes]]


class InferenceServicer:
    """Health, metadata, config and inference RPCs for one data plane."""

    def __init__(self, dataplane: DataPlane, limits: GrpcLimits, restrictions: Restrictions) -> None:
        self._dataplane = dataplane
        self._limits = limits
        self._restrictions = restrictions

    # -- unary RPCs ----------------------------------------------------------------------------

    async def server_live(self, request: pb.ServerLiveRequest) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)  # draining included, as over HTTP (naiad.http.app)

    async def server_ready(self, request: pb.ServerReadyRequest) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self._dataplane.ready())

    async def model_ready(self, request: pb.ModelReadyRequest) -> pb.ModelReadyResponse:
        version = codec.parse_version(request.version)
        return pb.ModelReadyResponse(ready=await self._dataplane.model_ready(request.name, version))

    async def server_metadata(self, request: pb.ServerMetadataRequest) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(**self._dataplane.server_metadata())

    async def model_metadata(self, request: pb.ModelMetadataRequest) -> pb.ModelMetadataResponse:
        metadata = self._dataplane.model_metadata(request.name, codec.parse_version(request.version))
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=metadata["name"],
            versions=metadata["versions"],
            platform=metadata["platform"],
            inputs=[tensor(**spec) for spec in metadata["inputs"]],
            outputs=[tensor(**spec) for spec in metadata["outputs"]],
        )

    async def model_config(self, request: pb.ModelConfigRequest) -> pb.ModelConfigResponse:
        model = self._dataplane.lifecycle.lookup(request.name, codec.parse_version(request.version))
        return pb.ModelConfigResponse(config=model.config)

    async def model_infer(self, requests: Any, context: Any) -> bytes:
        """Read the call's one message, decode it (its raw bytes are dropped here) and run it."""
        timing = FrontendTiming.start(self._dataplane.service.tracer, "GRPC")
        try:
            data = await context.read()
            if timing is not None:
                timing.received()
            if not isinstance(data, bytes):
                raise invalid_arg("ModelInfer needs one ModelInferRequest message; the call carried none")
            trim_after_call(context, len(data))
            request = infer.decode(self._dataplane, messages.parse_request(data), unary=True)
            del data
            request.decoded.parameters = with_headers(
                self._dataplane.grpc_headers, request.decoded.parameters, _metadata(context)
            )
            encoded = await infer.model_infer(self._dataplane, request, self._limits.max_message_size, timing)
            trim_after_call(context, encoded.size)
            return encoded.join()
        finally:
            if timing is not None:  # the answer (or the error) is written once the call is done
                context.add_done_callback(_call_done(timing, timing.sending()))

    async def model_statistics(self, request: pb.ModelStatisticsRequest) -> pb.ModelStatisticsResponse:
        body = self._dataplane.model_statistics(request.name, codec.parse_version(request.version))
        return json_format.ParseDict(body, pb.ModelStatisticsResponse())

    async def log_settings(self, request: pb.LogSettingsRequest) -> pb.LogSettingsResponse:
        if request.settings:
            verbose = request.settings.get("log_verbose_level")
            if verbose is not None and verbose.WhichOneof("parameter_choice") != "uint32_param":
                raise invalid_arg("expect int32 for 'log_verbose_level'")  # Triton's gRPC words
            changes = {key: _setting_value(value) for key, value in request.settings.items()}
            settings = self._dataplane.update_log_settings(changes)
        else:
            settings = self._dataplane.log_settings()
        response = pb.LogSettingsResponse()
        for key, value in settings.items():
            entry = response.settings[key]
            if isinstance(value, bool):
                entry.bool_param = value
            elif isinstance(value, int):
                entry.uint32_param = value
            else:
                entry.string_param = str(value)
        return response

    async def trace_setting(self, request: pb.TraceSettingRequest) -> pb.TraceSettingResponse:
        if request.settings:
            self._dataplane.check_trace_model(request.model_name)  # before the settings, as in Triton
            change = trace_settings.grpc_change({key: list(value.value) for key, value in request.settings.items()})
            settings = self._dataplane.update_trace_settings(request.model_name, change)
        else:
            settings = self._dataplane.trace_settings(request.model_name)
        response = pb.TraceSettingResponse()
        for key, value in settings.items():
            response.settings[key].value.extend(value if isinstance(value, list) else [value])
        return response

    async def repository_index(self, request: pb.RepositoryIndexRequest) -> pb.RepositoryIndexResponse:
        refuse_named_repository(request.repository_name)
        entries = self._dataplane.repository_index(ready_only=request.ready)
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**e) for e in entries])

    async def repository_model_load(self, request: pb.RepositoryModelLoadRequest) -> pb.RepositoryModelLoadResponse:
        refuse_named_repository(request.repository_name)
        config: str | None = None
        files: dict[str, bytes] = {}
        for key, value in request.parameters.items():  # Triton's words for what it does not take
            expected = "string_param" if key == "config" else "bytes_param" if key.startswith(FILE_PREFIX) else None
            if expected is None:
                raise invalid_arg(f"unrecognized load parameter '{key}'.")
            if value.WhichOneof("parameter_choice") != expected:
                raise invalid_arg(f"invalid value type for load parameter '{key}', expected {expected}.")
            if key == "config":
                config = value.string_param
            else:
                files[key] = value.bytes_param
        await self._dataplane.load_model(request.model_name, config, files or None)
        return pb.RepositoryModelLoadResponse()

    async def repository_model_unload(
        self, request: pb.RepositoryModelUnloadRequest
    ) -> pb.RepositoryModelUnloadResponse:
        refuse_named_repository(request.repository_name)
        dependents = False
        if "unload_dependents" in request.parameters:
            value = request.parameters["unload_dependents"]
            if value.WhichOneof("parameter_choice") != "bool_param":
                raise invalid_arg("invalid value type for 'unload_dependents' parameter, expected bool_param.")
            dependents = value.bool_param
        await self._dataplane.unload_model(request.model_name, unload_dependents=dependents)
        return pb.RepositoryModelUnloadResponse()

    # -- shared memory -------------------------------------------------------------------------

    async def system_shm_status(self, request: pb.SystemSharedMemoryStatusRequest) -> Message:
        response = pb.SystemSharedMemoryStatusResponse()
        for region in self._dataplane.shared_memory.status(SYSTEM, request.name):
            response.regions[region["name"]].CopyFrom(pb.SystemSharedMemoryStatusResponse.RegionStatus(**region))
        return response

    async def system_shm_register(self, request: pb.SystemSharedMemoryRegisterRequest) -> Message:
        if not request.name:
            raise invalid_arg("'region name' is necessary to register system shared memory region")
        self._dataplane.shared_memory.register_system(request.name, request.key, request.offset, request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    async def system_shm_unregister(self, request: pb.SystemSharedMemoryUnregisterRequest) -> Message:
        self._dataplane.shared_memory.unregister(SYSTEM, request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    async def cuda_shm_status(self, request: pb.CudaSharedMemoryStatusRequest) -> Message:
        response = pb.CudaSharedMemoryStatusResponse()
        for region in self._dataplane.shared_memory.status(CUDA, request.name):
            response.regions[region["name"]].CopyFrom(pb.CudaSharedMemoryStatusResponse.RegionStatus(**region))
        return response

    async def cuda_shm_register(self, request: pb.CudaSharedMemoryRegisterRequest) -> Message:
        if not request.name:
            raise invalid_arg("'region name' is necessary to register cuda shared memory region")
        if request.device_id < 0:
            raise invalid_arg(f"failed to register CUDA shared memory region '{request.name}': invalid device id")
        await asyncio.to_thread(
            self._dataplane.shared_memory.register_cuda,
            request.name,
            request.raw_handle,
            request.device_id,
            request.byte_size,
        )
        return pb.CudaSharedMemoryRegisterResponse()

    async def cuda_shm_unregister(self, request: pb.CudaSharedMemoryUnregisterRequest) -> Message:
        self._dataplane.shared_memory.unregister(CUDA, request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

    # -- streaming -----------------------------------------------------------------------------

    async def model_stream_infer(self, requests: Any, context: Any) -> None:
        if restricted.refused(self._restrictions.get(restricted.GROUPS["ModelStreamInfer"]), context):
            return
        if self._dataplane.state is ServerState.EXITING:  # as a unary call is refused: the call ends now,
            fail(context, grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)  # not when the shutdown's grace ends
            return
        end_on_error = None
        if _strict_errors(context):
            end_on_error = functools.partial(_end_with_error, context)
        session = StreamSession(
            self._dataplane,
            self._limits,
            on_message=trim_soon,
            end_on_error=end_on_error,
            metadata=tuple(_metadata(context)) if self._dataplane.grpc_headers is not None else (),
        )
        try:
            await session.run(context.read, context.write)
        except Exception as exc:  # a bug, or the call failed under us: end it, never crash the server
            log_unexpected(logger, "unexpected error in ModelStreamInfer", error=exc)
            fail(context, grpc.StatusCode.INTERNAL, f"internal server error: {type(exc).__name__}: {exc}")

    # -- registration --------------------------------------------------------------------------

    def handlers(self) -> dict[str, Any]:
        """Method name -> gRPC handler for every method of the service."""
        unary: dict[str, Unary] = {
            "ServerLive": self.server_live,
            "ServerReady": self.server_ready,
            "ModelReady": self.model_ready,
            "ServerMetadata": self.server_metadata,
            "ModelMetadata": self.model_metadata,
            "ModelConfig": self.model_config,
            "ModelStatistics": self.model_statistics,
            "LogSettings": self.log_settings,
            "TraceSetting": self.trace_setting,
            "RepositoryIndex": self.repository_index,
            "RepositoryModelLoad": self.repository_model_load,
            "RepositoryModelUnload": self.repository_model_unload,
            "SystemSharedMemoryStatus": self.system_shm_status,
            "SystemSharedMemoryRegister": self.system_shm_register,
            "SystemSharedMemoryUnregister": self.system_shm_unregister,
            "CudaSharedMemoryStatus": self.cuda_shm_status,
            "CudaSharedMemoryRegister": self.cuda_shm_register,
            "CudaSharedMemoryUnregister": self.cuda_shm_unregister,
        }
        handlers: dict[str, Any] = {}
        for method in pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods:
            restriction = self._restrictions.get(restricted.GROUPS[method.name])
            if method.name == "ModelStreamInfer":
                handlers[method.name] = grpc.stream_stream_rpc_method_handler(self.model_stream_infer)
            elif method.name == "ModelInfer":
                handle = _answer(method.name, self.model_infer, restriction, self._limits.max_message_size)
                handlers[method.name] = grpc.stream_unary_rpc_method_handler(handle)
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    _answer(
                        method.name, _ignoring_context(unary[method.name]), restriction, self._limits.max_message_size
                    ),
                    request_deserializer=message_factory.GetMessageClass(method.input_type).FromString,
                    response_serializer=message_factory.GetMessageClass(method.output_type).SerializeToString,
                )
        return handlers


def _answer(
    name: str, implementation: Handler, restriction: Restriction | None, max_message_size: int
) -> Callable[[Any, Any], Awaitable[Message | bytes | None]]:
    """A handler that checks the restriction and answers errors with a gRPC status."""

    async def handle(request: Any, context: Any) -> Message | bytes | None:
        if restricted.refused(restriction, context):
            return None
        try:
            response = await implementation(request, context)
            if isinstance(response, Message):
                codec.check_size(response.ByteSize(), max_message_size)
            return response
        except NaiadError as error:
            fail(context, grpc_status(error.code), error.message)
        except Exception as exc:
            log_unexpected(logger, "unexpected error in %s", name, error=exc)
            fail(context, grpc.StatusCode.INTERNAL, f"internal server error: {type(exc).__name__}: {exc}")
        return None

    return handle


def _ignoring_context(implementation: Unary) -> Handler:
    async def handle(request: Any, context: Any) -> Message:
        return await implementation(request)

    return handle


def _setting_value(value: Any) -> object:
    """A LogSettings value: its bool, uint32 or string, or None when no field is set."""
    which = value.WhichOneof("parameter_choice")
    return None if which is None else getattr(value, which)


def _call_done(timing: FrontendTiming, start: int) -> Callable[[Any], None]:
    """A call's done callback: its answer, written from ``start``, is out."""

    def done(_context: Any) -> None:
        timing.sent(start)
        timing.done()

    return done


def _metadata(context: Any) -> Iterator[tuple[str, str]]:
    """The call's metadata as text, read only when something iterates it (a header forward pattern);
    a binary (``-bin``) value is read as UTF-8, any byte that is not replaced."""
    for key, value in context.invocation_metadata() or ():
        yield key, value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _strict_errors(context: Any) -> bool:
    """Whether the client asked for Triton's strict stream mode (metadata ``triton_grpc_error: true``)."""
    return any(
        key == "triton_grpc_error" and str(value).lower() == "true"
        for key, value in context.invocation_metadata() or ()
    )


def _end_with_error(context: Any, error: NaiadError) -> None:
    fail(context, grpc_status(error.code), error.message)
