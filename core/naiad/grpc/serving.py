"""The gRPC server: a ``grpc.aio`` server on the naiad event loop, with Triton's options and
naiad's limits (:class:`~naiad.limits.GrpcLimits`).

What grpc core enforces for the limits: a message over ``--grpc-max-message-size`` (sent, received,
or received compressed and larger once decompressed) is refused with RESOURCE_EXHAUSTED before it
is buffered; ``--grpc-idle-timeout`` closes connections without calls (``grpc.max_connection_idle_ms``,
with a GOAWAY: clients reconnect on their next call); ``--grpc-handshake-timeout`` closes connections
that have not sent the HTTP/2 preface and settings in time (``grpc.server_handshake_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from dataclasses import dataclass

import grpc  # type: ignore[import-untyped,unused-ignore]

from naiad.dataplane import DataPlane
from naiad.grpc import health, servicer
from naiad.grpc.connection_cap import watch_connection_cap
from naiad.grpc.tls import GrpcTls
from naiad.limits import GrpcLimits
from naiad.restrictions import Restrictions

COMPRESSION_LEVELS = {"none": 0, "low": 1, "medium": 2, "high": 3}
"""``--grpc-infer-response-compression-level`` values and gRPC's compression levels."""

MAX_MESSAGE_BYTES = 2**31 - 1
"""gRPC's largest message (its channel arguments are 32-bit), Triton's send and receive limit."""

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
    tls: GrpcTls | None = None  # --grpc-use-ssl(-mutual): serve over TLS

    def channel_options(self) -> list[tuple[str, int]]:
        """The gRPC core channel arguments these settings stand for."""
        if self.infer_response_compression_level not in COMPRESSION_LEVELS:
            raise ValueError(
                f"unknown --grpc-infer-response-compression-level '{self.infer_response_compression_level}'; "
                f"choose one of {', '.join(COMPRESSION_LEVELS)}"
            )
        options = [
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


def limit_options(limits: GrpcLimits) -> list[tuple[str, int]]:
    """The gRPC core channel arguments that enforce ``limits`` (see the module's text)."""
    size = min(limits.max_message_size, MAX_MESSAGE_BYTES)
    return [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
        ("grpc.max_connection_idle_ms", _milliseconds(limits.idle_timeout_s)),
        ("grpc.server_handshake_timeout_ms", _milliseconds(limits.handshake_timeout_s)),
        ("grpc.max_allowed_incoming_connections", limits.max_connections),
    ]


def _milliseconds(seconds: float) -> int:
    return max(1, min(round(seconds * 1000), 2**31 - 1))


class GrpcFrontend:
    """The gRPC listener; create it inside the running event loop (it binds at once)."""

    def __init__(
        self,
        dataplane: DataPlane,
        host: str,
        port: int,
        settings: GrpcSettings,
        *,
        limits: GrpcLimits | None = None,
        restrictions: Restrictions | None = None,
    ) -> None:
        self._host = host
        self._tls = settings.tls
        limits = limits or GrpcLimits()
        self._max_connections = limits.max_connections
        self._cap_watch: asyncio.Task[None] | None = None
        restrictions = restrictions or Restrictions()
        self._server = grpc.aio.server(options=settings.channel_options() + limit_options(limits))
        for name, handlers in (
            (servicer.SERVICE, servicer.InferenceServicer(dataplane, limits, restrictions).handlers()),
            (health.SERVICE, health.health_handlers(dataplane, restrictions)),
        ):
            self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
            self._server.add_registered_method_handlers(name, handlers)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if settings.tls is None:
                self.port: int = self._server.add_insecure_port(target)
            else:
                self.port = self._server.add_secure_port(target, settings.tls.credentials())
        except RuntimeError as error:
            raise OSError(
                errno.EADDRINUSE,
                f"cannot listen for gRPC on {target}: {error}; another process may hold the port (check with "
                "`ss -ltnp`), or choose another with --grpc-port",
            ) from None

    def describe(self) -> str:
        tls = "" if self._tls is None else (" (TLS, client certificates required)" if self._tls.mutual else " (TLS)")
        return f"gRPC on {self._host}:{self.port}{tls}"

    async def start(self) -> None:
        await self._server.start()
        self._cap_watch = asyncio.create_task(
            watch_connection_cap(f"{self._host}:{self.port}", self.port, self._max_connections)
        )

    async def stop(self) -> None:
        """Stop accepting calls; calls still open after a short grace period are cancelled."""
        if self._cap_watch is not None:
            self._cap_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._cap_watch
        await self._server.stop(_SHUTDOWN_GRACE_S)
