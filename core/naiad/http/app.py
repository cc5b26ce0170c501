"""The KServe v2 HTTP/REST frontend: a starlette app over the data plane."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from naiad.dataplane import DataPlane, ServerState
from naiad.errors import NaiadError, invalid_arg
from naiad.http.body import BodyError
from naiad.http.disconnect import until_disconnected
from naiad.http.generate import (
    GenerateRequest,
    decode_generate,
    first_event,
    generate_events,
    generate_once,
    open_generate,
    stream_status,
)
from naiad.http.infer import error_body
from naiad.http.json_body import dump_json
from naiad.http.observability import observability_routes
from naiad.http.repository import repository_routes
from naiad.http.router import HttpRouter
from naiad.http.shared_memory import shared_memory_routes
from naiad.http.status import error_response
from naiad.http.traced import traced_endpoint
from naiad.limits import HttpLimits
from naiad.logs import log_unexpected
from naiad.restrictions import Restrictions
from naiad.tracing import FrontendTiming

logger = logging.getLogger(__name__)

_JSON = "application/json"
_TEXT = "text/plain"
_EVENT_STREAM = "text/event-stream; charset=utf-8"
_EMPTY_OK = Response(b"", status_code=200, headers={"content-type": _TEXT})  # as Triton answers
_EXITING = JSONResponse({"error": "Server not ready: it is shutting down"}, status_code=503)


def _json(body: str | bytes) -> Response:
    return Response(body, media_type=_JSON)


def _version(request: Request) -> str:
    version = request.path_params.get("version")
    return "" if version is None else str(version)


def build_app(
    dataplane: DataPlane,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    restrictions: Restrictions | None = None,
    limits: HttpLimits | None = None,
) -> HttpRouter:
    """The ASGI application serving every implemented endpoint of protocol-http.

    Inference goes straight to :mod:`naiad.http.infer`; every other endpoint is a starlette route,
    as are ``extra_routes`` (the plugins', e.g. an OpenAI-compatible ``/v1/...``, which belong to no
    restricted API group). :class:`~naiad.http.router.HttpRouter` applies ``restrictions`` and
    ``limits`` to all of them.
    """

    async def live(request: Request) -> Response:
        # Live while the process answers, draining included, as Triton's liveness: a liveness probe
        # failing during a graceful drain would have the pod killed before the drain ends.
        return _EMPTY_OK

    async def ready(request: Request) -> Response:
        if dataplane.state is ServerState.EXITING:
            return _EXITING
        return _EMPTY_OK if dataplane.ready() else Response(b"", status_code=400)

    async def model_ready(request: Request) -> Response:
        version = _version(request)
        if version.isdigit() and int(version) >= 2**63:  # as Triton: its std::stol overflows
            message = (
                f"failed to get model version from specified version string '{version}' (details: stol), "
                "version should be an integral value > 0"
            )
            return Response(error_body(message), status_code=400, headers={"content-type": _TEXT})
        if await dataplane.model_ready(request.path_params["model"], version):
            return _EMPTY_OK
        return Response(error_body("Model version not ready"), status_code=400, headers={"content-type": _TEXT})

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

    async def infer_routed_elsewhere(request: Request) -> Response:
        raise AssertionError("InferRouter answers every POST to an infer path")

    async def generate(request: Request, timing: FrontendTiming | None) -> Response:
        try:
            decoded = await _decode_generate(dataplane, request, timing)
            stream = open_generate(dataplane, decoded, timing)
            status, document = await until_disconnected(request.receive, generate_once(decoded, stream))
        except NaiadError as error:
            return error_response(error)
        return Response(dump_json(document), status_code=status, media_type=_JSON)

    async def generate_stream(request: Request, timing: FrontendTiming | None) -> Response:
        try:
            decoded = await _decode_generate(dataplane, request, timing)
            stream = open_generate(dataplane, decoded, timing)
            events, first = await until_disconnected(request.receive, first_event(stream))
        except NaiadError as error:
            return error_response(error)
        body = generate_events(decoded, events, first)
        return StreamingResponse(body, status_code=stream_status(first), media_type=_EVENT_STREAM)

    model_routes = [
        ("/ready", model_ready, "GET"),
        ("/config", model_config, "GET"),
        ("/infer", infer_routed_elsewhere, "POST"),  # POSTs never get here; other methods get 405
        ("/generate", traced_endpoint(dataplane.service.tracer, generate), "POST"),
        ("/generate_stream", traced_endpoint(dataplane.service.tracer, generate_stream), "POST"),
        ("", model_metadata, "GET"),
    ]
    routes = [
        Route("/v2/health/live", live, methods=["GET"]),
        Route("/v2/health/ready", ready, methods=["GET"]),
        Route("/v2", server_metadata, methods=["GET"]),
        *observability_routes(dataplane),
        *repository_routes(dataplane),
        *shared_memory_routes(dataplane.shared_memory),
        *extra_routes,
    ]
    for suffix, endpoint, method in model_routes:
        routes.append(Route(f"/v2/models/{{model}}/versions/{{version:int}}{suffix}", endpoint, methods=[method]))
        routes.append(Route(f"/v2/models/{{model}}{suffix}", endpoint, methods=[method]))

    async def http_error(request: Request, exc: Exception) -> Response:
        """A path or method nothing serves, answered with the content type Triton gives it."""
        assert isinstance(exc, HTTPException)
        return Response(
            error_body(exc.detail),
            status_code=exc.status_code,
            headers={"content-type": _route_error_type(request.url.path, exc.status_code)},
        )

    async def body_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BodyError)
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ClientDisconnect):  # nobody is left to answer
            return Response(b"", status_code=400)
        log_unexpected(logger, "unexpected error serving %s %s", request.method, request.url.path, error=exc)
        return JSONResponse({"error": f"internal server error: {type(exc).__name__}: {exc}"}, status_code=500)

    fallback = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, BodyError: body_error, Exception: unexpected_error},
    )
    for route in fallback.routes:  # Triton answers HEAD 405 wherever it answers GET
        if isinstance(route, Route) and route.methods is not None:
            route.methods.discard("HEAD")
    fallback.router.redirect_slashes = False  # Triton answers a path with a trailing slash 404, not a redirect
    return HttpRouter(dataplane, fallback, limits or HttpLimits(), restrictions or Restrictions())


async def _decode_generate(dataplane: DataPlane, request: Request, timing: FrontendTiming | None) -> GenerateRequest:
    model = dataplane.service.resolve(request.path_params["model"], _version(request))
    if request.headers.get("content-encoding", "identity") != "identity":
        raise invalid_arg("Unsupported content-encoding, only 'identity' is supported.")
    body = await request.body()
    if timing is not None:
        timing.received()
    return decode_generate(model, body)


def _route_error_type(path: str, status: int) -> str:
    """Triton answers an unknown path, and a method the health, readiness and infer endpoints do not
    take, as text/plain; a method another endpoint does not take as JSON."""
    plain = status != 405 or path.startswith("/v2/health/") or path.endswith(("/ready", "/infer"))
    return _TEXT if plain else _JSON
