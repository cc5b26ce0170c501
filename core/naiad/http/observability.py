"""The statistics (``/v2/models[/{m}[/versions/{v}]]/stats``), trace (``/v2[/models/{m}]/trace/setting``) and
logging (``/v2/logging``) extensions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from naiad.dataplane import DataPlane
from naiad.errors import ErrorCode, NaiadError
from naiad.http.codec import load_json, parse_error
from naiad.http.status import error_response
from naiad.logs import canonical_format, escape
from naiad.trace_settings import http_change


def observability_routes(dataplane: DataPlane) -> list[Route]:
    """Routes to place before the generic model routes (``/v2/models/stats`` must win over a model named so)."""

    async def statistics(request: Request) -> Response:
        version = request.path_params.get("version")
        try:
            body = dataplane.model_statistics(
                request.path_params.get("model", ""), "" if version is None else str(version)
            )
        except NaiadError as error:
            return error_response(error)
        return JSONResponse(body)

    async def logging_settings(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(dataplane.log_settings())
        try:
            changes = _log_changes(await request.body())
            return JSONResponse(dataplane.update_log_settings(changes))
        except NaiadError as error:
            return error_response(error)

    async def trace_setting(request: Request) -> Response:
        model = request.path_params.get("model", "")
        try:
            settings = dataplane.trace_settings(model)  # an unknown model is named before the body is read
            if request.method == "GET":
                return JSONResponse(settings)
            change = http_change(load_json(await request.body()))
            return JSONResponse(dataplane.update_trace_settings(model, change))
        except NaiadError as error:
            return error_response(error)

    return [
        Route("/v2/trace/setting", trace_setting, methods=["GET", "POST"]),
        Route("/v2/models/{model}/trace/setting", trace_setting, methods=["GET", "POST"]),
        Route("/v2/models/stats", statistics, methods=["GET"]),
        Route("/v2/models/{model}/versions/{version:int}/stats", statistics, methods=["GET"]),
        Route("/v2/models/{model}/stats", statistics, methods=["GET"]),
        Route("/v2/logging", logging_settings, methods=["GET", "POST"]),
    ]


def _log_changes(body: bytes) -> dict[str, object]:
    """The log settings a ``/v2/logging`` body changes, read as Triton's HTTP frontend reads them: a
    body that is not an object changes nothing, a ``null`` value leaves its setting as it is, and a
    value of the wrong JSON type is its 500."""
    document = load_json(body)
    if not isinstance(document, dict):
        return {}
    parsed = {key: value for key, value in document.items() if value is not None}
    for key, value in parsed.items():
        if key in ("log_info", "log_warning", "log_error") and not isinstance(value, bool):
            raise parse_error("attempt to access JSON non-boolean as boolean")
        if key == "log_verbose_level" and (type(value) is not int or value < 0):
            raise parse_error("attempt to access JSON non-unsigned-integer as unsigned-integer")
        if key == "log_format" and not isinstance(value, str):
            raise parse_error("attempt to access JSON non-string as string")
        if key == "log_format" and not _known_format(value):
            raise NaiadError(f"invalid argument for --log_format, got: {escape(value)}", ErrorCode.UNAVAILABLE)
    return parsed


def _known_format(name: str) -> bool:
    try:
        canonical_format(name)
    except ValueError:
        return False
    return True
