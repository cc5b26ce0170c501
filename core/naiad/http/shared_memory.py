"""The system and CUDA shared-memory extensions over HTTP: ``/v2/{system,cuda}sharedmemory/...``."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from naiad.errors import NaiadError, invalid_arg
from naiad.http.codec import load_json
from naiad.http.status import error_response
from naiad.shared_memory import CUDA, SYSTEM, SharedMemoryRegistry
from naiad.shared_memory.cuda import IPC_HANDLE_SIZE

_UNSIGNED = "attempt to access JSON non-unsigned-integer as unsigned-integer"

Endpoint = Callable[[Request], Awaitable[Response]]


def shared_memory_routes(registry: SharedMemoryRegistry) -> list[Route]:
    """Status (GET), register and unregister (POST) for one region or all, of both kinds."""

    def answering(action: Callable[[Request], Awaitable[Response]]) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            try:
                return await action(request)
            except NaiadError as error:
                return error_response(error)

        return endpoint

    def status(kind: str) -> Endpoint:
        async def action(request: Request) -> Response:
            return JSONResponse(registry.status(kind, request.path_params.get("name", "")))

        return answering(action)

    def unregister(kind: str) -> Endpoint:
        async def action(request: Request) -> Response:
            registry.unregister(kind, request.path_params.get("name", ""))
            return Response(b"", media_type="application/json")

        return answering(action)

    async def register_system(request: Request) -> Response:
        name = request.path_params.get("name", "")
        if not name:
            raise invalid_arg("'region name' is necessary to register system shared memory region")
        body = _json_object(await request.body())
        key = _required(body, "key")
        if not isinstance(key, str):
            raise NaiadError("attempt to access JSON non-string as string")
        offset = _unsigned(body.get("offset", 0))
        byte_size = _unsigned(_required(body, "byte_size"))
        registry.register_system(name, key, offset, byte_size)
        return Response(b"", media_type="application/json")

    async def register_cuda(request: Request) -> Response:
        name = request.path_params.get("name", "")
        if not name:
            raise invalid_arg("'region name' is necessary to register cuda shared memory region")
        body = _json_object(await request.body())
        handle = _required(body, "raw_handle")
        encoded = handle.get("b64") if isinstance(handle, dict) else None
        if not isinstance(encoded, str):
            raise NaiadError("Unable to parse 'b64': attempt to access JSON non-string as string")
        byte_size = _unsigned(_required(body, "byte_size"))
        device_id = _unsigned(_required(body, "device_id"))
        try:
            raw_handle = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raw_handle = b""
        if len(raw_handle) != IPC_HANDLE_SIZE:  # refused before a GPU is looked for, as Triton does
            raise invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
        await asyncio.to_thread(registry.register_cuda, name, raw_handle, device_id, byte_size)
        return Response(b"", media_type="application/json")

    routes: list[Route] = []
    for kind, prefix, register in (
        (SYSTEM, "/v2/systemsharedmemory", register_system),
        (CUDA, "/v2/cudasharedmemory", register_cuda),
    ):
        for scope in (prefix, prefix + "/region/{name}"):
            routes.append(Route(scope + "/status", status(kind), methods=["GET"]))
            routes.append(Route(scope + "/register", answering(register), methods=["POST"]))
            routes.append(Route(scope + "/unregister", unregister(kind), methods=["POST"]))
    return routes


def _json_object(body: bytes) -> dict[str, Any]:
    """The register request's fields; a document that is not an object has none (Triton then names
    the first field it misses)."""
    parsed = load_json(body)
    return parsed if isinstance(parsed, dict) else {}


def _required(body: dict[str, Any], field: str) -> Any:
    if field not in body:
        raise invalid_arg(f"Shared memory register request has no '{field}' field")
    return body[field]


def _unsigned(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NaiadError(_UNSIGNED)
    return value
