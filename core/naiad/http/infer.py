"""``POST /v2/models/{m}[/versions/{v}]/infer`` as a bare ASGI endpoint: the hot path.

Inference requests skip the router and middleware of the starlette app (every other endpoint
goes through it), which is a measurable share of a small request's cost.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from naiad.dataplane import DataPlane
from naiad.errors import ErrorCode, NaiadError, invalid_arg
from naiad.http import codec
from naiad.http.disconnect import until_disconnected
from naiad.http.status import http_status

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DECOUPLED_ON_HTTP = "HTTP end point doesn't support models with decoupled transaction policy"

INFER_PATH = re.compile(r"/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[0-9]+))?/infer")


class InferRouter:
    """Sends POSTs to an infer path straight to :func:`infer`; everything else to ``fallback``."""

    def __init__(self, dataplane: DataPlane, fallback: ASGIApp) -> None:
        self._dataplane = dataplane
        self._fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            match = INFER_PATH.fullmatch(scope["path"])
            if match is not None:
                await self._respond(scope, receive, send, match["model"], match["version"] or "")
                return
        await self._fallback(scope, receive, send)

    async def _respond(self, scope: Scope, receive: Receive, send: Send, model: str, version: str) -> None:
        try:
            status, headers, body = await infer(self._dataplane, scope, receive, model, version)
        except NaiadError as error:
            status, headers, body = http_status(error.code), _JSON_HEADERS, _error_body(error.message)
        except Exception as error:
            logger.exception(
                "unexpected error serving an inference request for model '%s' version '%s'",
                model,
                version,
                extra={"model": model},
            )
            status, headers = 500, _JSON_HEADERS
            body = _error_body(f"internal server error: {type(error).__name__}: {error}")
        headers = [*headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


_JSON_HEADERS = [(b"content-type", b"application/json")]
_BINARY_HEADERS = [(b"content-type", b"application/octet-stream")]


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}, separators=(",", ":")).encode()


async def infer(
    dataplane: DataPlane, scope: Scope, receive: Receive, name: str, version: str
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run one infer request; returns status, headers and body."""
    model = dataplane.service.resolve(name, version, refuse_decoupled=DECOUPLED_ON_HTTP)
    headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
    body = _decompress(await _read_body(receive), headers.get("content-encoding"))
    header_length = _header_length(headers.get("inference-header-content-length"))
    decoded = codec.decode_request(body, header_length, name, model.signature)
    inference = dataplane.infer(
        model, decoded.inputs, outputs=decoded.outputs, request_id=decoded.id, parameters=decoded.parameters
    )
    response = await until_disconnected(receive, inference)
    payload, json_length = codec.encode_response(
        response, model_name=model.name, model_version=model.version, request=decoded
    )
    response_headers = list(_JSON_HEADERS if json_length is None else _BINARY_HEADERS)
    if json_length is not None:
        response_headers.append((b"inference-header-content-length", str(json_length).encode()))
    encoding = pick_encoding(headers.get("accept-encoding", ""))
    if encoding:
        payload = gzip.compress(payload, 1) if encoding == "gzip" else zlib.compress(payload, 1)
        response_headers.append((b"content-encoding", encoding.encode()))
    return 200, response_headers, payload


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise NaiadError("the client disconnected while sending the request body", ErrorCode.CANCELLED)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _header_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        raise invalid_arg(f"Inference-Header-Content-Length must be an integer, got '{value}'") from None
    if length < 0:
        raise invalid_arg(f"Inference-Header-Content-Length must not be negative, got {length}")
    return length


def _decompress(body: bytes, encoding: str | None) -> bytes:
    if encoding is None or encoding == "identity":
        return body
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError) as error:
        raise invalid_arg(f"failed to decompress the {encoding} request body: {error}") from None
    raise invalid_arg(f"unsupported Content-Encoding '{encoding}'; use gzip, deflate or identity")


def pick_encoding(accept: str) -> str:
    """The best of gzip/deflate the client accepts (q-weights honoured), or '' for identity."""
    best, best_q = "", 0.0
    for part in accept.split(","):
        token, _, params = part.strip().partition(";")
        token = token.strip().lower()
        if token not in ("gzip", "deflate"):
            continue
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                quality = _float(value)
        if quality > best_q:
            best, best_q = token, quality
    return best


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
