"""The statistics (``/v2/models[/{m}[/versions/{v}]]/stats``) and logging (``/v2/logging``) extensions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from naiad.dataplane import DataPlane
from naiad.errors import NaiadError, invalid_arg
from naiad.http import nesting
from naiad.http.json_errors import not_json
from naiad.http.status import error_response


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
            changes = _json_object(await request.body())
            return JSONResponse(dataplane.update_log_settings(changes))
        except NaiadError as error:
            return error_response(error)

    return [
        Route("/v2/models/stats", statistics, methods=["GET"]),
        Route("/v2/models/{model}/versions/{version:int}/stats", statistics, methods=["GET"]),
        Route("/v2/models/{model}/stats", statistics, methods=["GET"]),
        Route("/v2/logging", logging_settings, methods=["GET", "POST"]),
    ]


def _json_object(body: bytes) -> dict[str, object]:
    try:
        parsed = nesting.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise invalid_arg(not_json(body, error)) from None
    if not isinstance(parsed, dict):
        raise invalid_arg("the request body must be a JSON object of log settings")
    return parsed
