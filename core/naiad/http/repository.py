"""The model-repository extension over HTTP: index, load (with ``config`` and ``file:`` overrides) and unload.

Each path may name a repository (``/v2/repository/<r>/...``), as Triton's do: the index ignores the
name, a load or unload that gives one is refused (501)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from naiad.dataplane import DataPlane, refuse_named_repository
from naiad.errors import NaiadError, invalid_arg
from naiad.http.codec import load_json
from naiad.http.status import error_response
from naiad.overrides import FILE_PREFIX


async def _json_body(request: Request) -> dict[str, Any]:
    """The optional JSON object body of a repository request (empty, or not an object: ``{}``, as
    Triton reads it)."""
    body = await request.body()
    if not body.strip():
        return {}
    document = load_json(body)
    return document if isinstance(document, dict) else {}


_EMPTY_JSON = {"content-type": "application/json"}  # Triton's load and unload answer an empty body so


def _parameters(document: dict[str, Any]) -> dict[str, Any]:
    parameters = document.get("parameters", {})
    if not isinstance(parameters, dict):
        raise NaiadError("attempt to get members for non-object")
    return parameters


def _overrides(parameters: dict[str, Any]) -> tuple[str | None, dict[str, bytes]]:
    """A load's ``config`` and ``file:<path>`` parameters (the files' base64 decoded), read in order
    as Triton reads them: a value that is not a string, or any other parameter, is Triton's 500."""
    config: str | None = None
    files: dict[str, bytes] = {}
    for key, value in parameters.items():
        if not isinstance(value, str):
            raise NaiadError("attempt to access JSON non-string as string")
        if key == "config":
            config = value
        elif key.startswith(FILE_PREFIX):
            try:
                files[key] = base64.b64decode(value, validate=True)
            except binascii.Error:
                raise invalid_arg(f"File parameter '{key}' is not valid base64") from None
        else:
            raise NaiadError("unexpected error on creating Triton parameter")
    return config, files


def repository_routes(dataplane: DataPlane) -> list[Route]:
    """POST /v2/repository[/{r}]/index and /v2/repository[/{r}]/models/{m}/load|unload."""

    async def index(request: Request) -> Response:
        try:
            document = await _json_body(request)
            ready = document.get("ready", False)
            if not isinstance(ready, bool):
                raise NaiadError("attempt to access JSON non-boolean as boolean")
            return JSONResponse(dataplane.repository_index(ready_only=ready))
        except NaiadError as error:
            return error_response(error)

    async def load(request: Request) -> Response:
        try:
            refuse_named_repository(request.path_params.get("repository", ""))
            config, files = _overrides(_parameters(await _json_body(request)))
            await dataplane.load_model(request.path_params["model"], config, files or None)
            return Response(b"", status_code=200, headers=_EMPTY_JSON)
        except NaiadError as error:
            return error_response(error)

    async def unload(request: Request) -> Response:
        try:
            refuse_named_repository(request.path_params.get("repository", ""))
            try:
                document = await _json_body(request)
            except NaiadError:  # Triton's unload goes ahead without the parameters of a body it cannot parse
                document = {}
            parameters = document.get("parameters")  # Triton's unload reads no other shape
            dependents = isinstance(parameters, dict) and parameters.get("unload_dependents") is True
            await dataplane.unload_model(request.path_params["model"], unload_dependents=dependents)
            return Response(b"", status_code=200, headers=_EMPTY_JSON)
        except NaiadError as error:
            return error_response(error)

    return [
        Route(f"/v2/repository{named}{path}", endpoint, methods=["POST"])
        for named in ("", "/{repository}")
        for path, endpoint in (("/index", index), ("/models/{model}/load", load), ("/models/{model}/unload", unload))
    ]
