"""What one client may cost the server: sizes, timeouts and connection counts, per transport.

Every limit is a command-line flag (``docs/security.md`` lists them); Triton's name is used where
Triton has the flag (``--http-max-input-size``).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
MAX_GRPC_MESSAGE_SIZE = 2**31 - 1
"""gRPC's largest message, and Triton's limit."""


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Limits of the HTTP listener (and, for connections and timeouts, of the metrics listener).

    ``max_input_size`` caps a request body, before and after decompression, and every tensor decoded
    from it; ``header_timeout_s`` is the longest a client may take to send a request's headers,
    ``body_timeout_s`` the longest pause while its body arrives and ``idle_timeout_s`` how long a
    keep-alive connection may sit between requests.
    """

    max_input_size: int = 64 * MIB
    max_header_size: int = 64 * 1024
    max_headers: int = 100
    header_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    idle_timeout_s: float = 60.0
    max_connections: int = 1024


@dataclass(frozen=True, slots=True)
class GrpcLimits:
    """Limits of the gRPC listener.

    ``max_message_size`` caps a received (and a sent) message, compressed or not; a
    ModelStreamInfer call reads its next request only while fewer than ``stream_backlog`` of its
    requests are in progress or have responses the client has not read yet; ``idle_timeout_s``
    closes connections without calls, ``handshake_timeout_s`` those that never finish connecting;
    ``max_connections`` caps open connections (gRPC closes the ones above it at once).
    """

    max_message_size: int = MAX_GRPC_MESSAGE_SIZE
    stream_backlog: int = 256
    idle_timeout_s: float = 300.0
    handshake_timeout_s: float = 30.0
    max_connections: int = 1024


DEFAULT_MAX_INSTANCES_PER_MODEL = 128
"""``--max-instances-per-model``: instances one model version may ask for (one thread each)."""
