"""The gRPC server: a ``grpc.aio`` server on the naiad event loop, with Triton's options."""

from __future__ import annotations

import errno
from dataclasses import dataclass

import grpc  # type: ignore[import-untyped,unused-ignore]

from naiad.dataplane import DataPlane
from naiad.grpc import health, servicer
from naiad.grpc.codec import MAX_MESSAGE_BYTES

COMPRESSION_LEVELS = {"none": 0, "low": 1, "medium": 2, "high": 3}
"""``--grpc-infer-response-compression-level`` values and gRPC's compression levels."""

_SHUTDOWN_GRACE_S = 5.0


@dataclass(frozen=True, slots=True)
class GrpcSettings:
    """Triton's ``--grpc-*`` transport flags, with Triton's defaults (times in milliseconds)."""

    keepalive_time_ms: int = 7_200_000
    keepalive_timeout_ms: int = 20_000
    keepalive_permit_without_calls: bool = False
    http2_max_pings_without_data: int = 2
    http2_min_recv_ping_interval_without_data_ms: int = 300_000
    http2_max_ping_strikes: int = 2
    max_connection_age_ms: int | None = None
    max_connection_age_grace_ms: int | None = None
    infer_response_compression_level: str = "none"
    reuse_port: bool = False

    def channel_options(self) -> list[tuple[str, int]]:
        """The gRPC core channel arguments these settings stand for."""
        if self.infer_response_compression_level not in COMPRESSION_LEVELS:
            raise ValueError(
                f"unknown --grpc-infer-response-compression-level '{self.infer_response_compression_level}'; "
                f"choose one of {', '.join(COMPRESSION_LEVELS)}"
            )
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", self.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", int(self.keepalive_permit_without_calls)),
            ("grpc.http2.max_pings_without_data", self.http2_max_pings_without_data),
            (
                "grpc.http2.min_ping_interval_without_data_ms",
                self.http2_min_recv_ping_interval_without_data_ms,
            ),
            ("grpc.http2.max_ping_strikes", self.http2_max_ping_strikes),
            ("grpc.so_reuseport", int(self.reuse_port)),
        ]
        if self.max_connection_age_ms is not None:
            options.append(("grpc.max_connection_age_ms", self.max_connection_age_ms))
        if self.max_connection_age_grace_ms is not None:
            options.append(("grpc.max_connection_age_grace_ms", self.max_connection_age_grace_ms))
        level = COMPRESSION_LEVELS[self.infer_response_compression_level]
        if level:
            options.append(("grpc.default_compression_level", level))
        return options


class GrpcFrontend:
    """The gRPC listener; create it inside the running event loop (it binds at once)."""

    def __init__(self, dataplane: DataPlane, host: str, port: int, settings: GrpcSettings) -> None:
        self._host = host
        self._server = grpc.aio.server(options=settings.channel_options())
        for name, handlers in (
            (servicer.SERVICE, servicer.InferenceServicer(dataplane).handlers()),
            (health.SERVICE, health.health_handlers(dataplane)),
        ):
            self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
            self._server.add_registered_method_handlers(name, handlers)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port: int = self._server.add_insecure_port(target)
        except RuntimeError as error:
            raise OSError(
                errno.EADDRINUSE,
                f"cannot listen for gRPC on {target}: {error}; another process may hold the port (check with "
                "`ss -ltnp`), or choose another with --grpc-port",
            ) from None

    def describe(self) -> str:
        return f"gRPC on {self._host}:{self.port}"

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        """Stop accepting calls; calls still open after a short grace period are cancelled."""
        await self._server.stop(_SHUTDOWN_GRACE_S)
