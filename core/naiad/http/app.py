"""The KServe v2 HTTP/REST frontend: a starlette app over the data plane."""

from __future__ import annotations

import gzip
import logging
import zlib
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from naiad.dataplane import DataPlane, PreparedRequest, ServerState
from naiad.errors import NaiadError, invalid_arg, unsupported
from naiad.http import codec
from naiad.http.disconnect import until_disconnected
from naiad.http.generate import generate_events, generate_once, prepare_generate
from naiad.http.status import http_status

logger = logging.getLogger(__name__)

_JSON = "application/json"
_EVENT_STREAM = "text/event-stream; charset=utf-8"
_EMPTY_OK = Response(b"", status_code=200)
_EXITING = JSONResponse({"error": "Server not ready: it is shutting down"}, status_code=503)


def error_response(error: NaiadError) -> Response:
    """Triton's error body ``{"error": "..."}`` with the status for the error's code."""
    return JSONResponse({"error": error.message}, status_code=http_status(error.code))


def _json(body: str | bytes) -> Response:
    return Response(body, media_type=_JSON)


def _version(request: Request) -> str:
    version = request.path_params.get("version")
    return "" if version is None else str(version)


def build_app(dataplane: DataPlane) -> Starlette:
    """The starlette application serving every implemented endpoint of protocol-http."""

    async def live(request: Request) -> Response:
        return _EMPTY_OK if dataplane.live() else _EXITING

    async def ready(request: Request) -> Response:
        if dataplane.state is ServerState.EXITING:
            return _EXITING
        return _EMPTY_OK if dataplane.ready() else Response(b"", status_code=400)

    async def model_ready(request: Request) -> Response:
        if dataplane.model_ready(request.path_params["model"], _version(request)):
            return _EMPTY_OK
        return JSONResponse({"error": "Model version not ready"}, status_code=400)

    async def server_metadata(request: Request) -> Response:
        return JSONResponse(dataplane.server_metadata())

    async def model_metadata(request: Request) -> Response:
        try:
            return JSONResponse(dataplane.model_metadata(request.path_params["model"], _version(request)))
        except NaiadError as error:
            return error_response(error)

    async def model_config(request: Request) -> Response:
        try:
            return _json(dataplane.model_config_json(request.path_params["model"], _version(request)))
        except NaiadError as error:
            return error_response(error)

    async def infer(request: Request) -> Response:
        try:
            return await _infer(dataplane, request)
        except NaiadError as error:
            return error_response(error)

    async def generate(request: Request) -> Response:
        try:
            prepared = await _prepare_generate(dataplane, request)
            return JSONResponse(await until_disconnected(request, generate_once(dataplane, prepared)))
        except NaiadError as error:
            return error_response(error)

    async def generate_stream(request: Request) -> Response:
        try:
            prepared = await _prepare_generate(dataplane, request)
        except NaiadError as error:
            return error_response(error)
        return StreamingResponse(generate_events(dataplane, prepared), media_type=_EVENT_STREAM)

    model_routes = [
        ("/ready", model_ready, "GET"),
        ("/config", model_config, "GET"),
        ("/infer", infer, "POST"),
        ("/generate", generate, "POST"),
        ("/generate_stream", generate_stream, "POST"),
        ("", model_metadata, "GET"),
    ]
    routes = [
        Route("/v2/health/live", live, methods=["GET"]),
        Route("/v2/health/ready", ready, methods=["GET"]),
        Route("/v2", server_metadata, methods=["GET"]),
    ]
    for suffix, endpoint, method in model_routes:
        routes.append(Route(f"/v2/models/{{model}}/versions/{{version:int}}{suffix}", endpoint, methods=[method]))
        routes.append(Route(f"/v2/models/{{model}}{suffix}", endpoint, methods=[method]))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        logger.exception("unexpected error serving %s %s", request.method, request.url.path)
        return JSONResponse({"error": f"internal server error: {type(exc).__name__}: {exc}"}, status_code=500)

    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: unexpected_error},
    )


async def _infer(dataplane: DataPlane, request: Request) -> Response:
    name = request.path_params["model"]
    model = dataplane.lifecycle.lookup(name, _version(request))
    body = _decompress(await request.body(), request.headers.get("content-encoding"))
    header_length = _header_length(request.headers.get("inference-header-content-length"))
    assert model.signature is not None
    decoded = codec.decode_request(body, header_length, name, model.signature)
    prepared = dataplane.prepare(
        model,
        decoded.inputs,
        [output.name for output in decoded.outputs],
        request_id=decoded.id,
        parameters=decoded.parameters,
    )
    if model.signature.decoupled:
        raise unsupported("HTTP end point doesn't support models with decoupled transaction policy")
    response = await until_disconnected(request, dataplane.infer(prepared))
    payload, json_length = codec.encode_response(
        response, model_name=model.name, model_version=model.version, request=decoded
    )
    headers: dict[str, str] = {}
    if json_length is not None:
        headers["Inference-Header-Content-Length"] = str(json_length)
    encoding = _pick_encoding(request.headers.get("accept-encoding", ""))
    if encoding:
        payload = gzip.compress(payload, 1) if encoding == "gzip" else zlib.compress(payload, 1)
        headers["Content-Encoding"] = encoding
    media_type = _JSON if json_length is None else "application/octet-stream"
    return Response(payload, headers=headers, media_type=media_type)


async def _prepare_generate(dataplane: DataPlane, request: Request) -> PreparedRequest:
    model = dataplane.lifecycle.lookup(request.path_params["model"], _version(request))
    if request.headers.get("content-encoding", "identity") != "identity":
        raise invalid_arg("Unsupported content-encoding, only 'identity' is supported.")
    return prepare_generate(dataplane, model, await request.body())


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


def _pick_encoding(accept: str) -> str:
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


def _float(value: Any) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
