"""``POST /v2/models/{m}[/versions/{v}]/infer`` as a bare ASGI endpoint: the hot path.

Inference requests skip the router and middleware of the starlette app (every other endpoint
goes through it), which is a measurable share of a small request's cost. The body is read whole,
within the HTTP limits (:mod:`naiad.http.body`), before anything else, as Triton does.
"""

from __future__ import annotations

import gzip
import logging
import re
import zlib
from collections.abc import Callable, Iterable

from naiad.dataplane import DataPlane, ServerState
from naiad.errors import ErrorCode, NaiadError
from naiad.header_forwarding import with_headers
from naiad.http import codec
from naiad.http.asgi import CLOSE, JSON_HEADERS, TEXT_HEADERS, Receive, Scope, Send, respond
from naiad.http.body import BodyError, BodyState, BodyWatch, decompress, raw_too_large, read_body, too_large
from naiad.http.direct import DirectChannel, channel_of
from naiad.http.disconnect import until_disconnected
from naiad.http.json_body import dump_json
from naiad.http.status import http_status
from naiad.inference import InferenceResponse
from naiad.limits import HttpLimits
from naiad.logs import log_unexpected
from naiad.models import ServingModel
from naiad.sinks import single_response
from naiad.tracing import FrontendTiming

logger = logging.getLogger(__name__)

DECOUPLED_ON_HTTP = "HTTP end point doesn't support models with decoupled transaction policy"

INFER_PATH = re.compile(r"/v2/models/(?P<model>[^/]+)(?:/versions/(?P<version>[0-9]+))?/infer")

_BINARY_HEADERS = [(b"content-type", b"application/octet-stream")]


def error_body(message: str) -> bytes:
    """Triton's error document ``{"error": "..."}``."""
    return dump_json({"error": message})


async def serve_infer(
    dataplane: DataPlane,
    limits: HttpLimits,
    watch: BodyWatch,
    scope: Scope,
    receive: Receive,
    send: Send,
    model: str,
    version: str,
) -> None:
    """Answer one infer request; a body left unread, or a server shutting down, closes the connection."""
    timing = FrontendTiming.start(dataplane.service.tracer, "HTTP")
    headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
    state = BodyState.of(headers)
    channel = channel_of(scope)
    try:
        try:
            sent = channel.sent_headers(scope["headers"]) if channel is not None else headers.items()
            status, response_headers, body = await infer(
                dataplane, limits, watch, headers, sent, state, receive, channel, model, version, timing
            )
        except BodyError as error:
            status, response_headers, body = error.status, JSON_HEADERS, [error_body(error.message)]
        except NaiadError as error:
            status, response_headers, body = http_status(error.code), JSON_HEADERS, [error_body(error.message)]
        except Exception as error:
            log_unexpected(
                logger,
                "unexpected error serving an inference request for model '%s' version '%s'",
                model,
                version,
                error=error,
            )
            status, response_headers = 500, JSON_HEADERS
            body = [error_body(f"internal server error: {type(error).__name__}: {error}")]
        if state.unread or dataplane.state is ServerState.EXITING:
            response_headers = [*response_headers, CLOSE]
        sending = timing.sending() if timing is not None else 0
        await respond(send, status, response_headers, body, channel)
        if timing is not None:
            timing.sent(sending)
    finally:
        if timing is not None:
            timing.done()


_ENCODINGS_TAKEN = [*TEXT_HEADERS, (b"accept-encoding", b"gzip, deflate")]  # with a refused Content-Encoding


async def infer(
    dataplane: DataPlane,
    limits: HttpLimits,
    watch: BodyWatch,
    headers: dict[str, str],
    sent: Iterable[tuple[str, str]],
    state: BodyState,
    receive: Receive,
    channel: DirectChannel | None,
    name: str,
    version: str,
    timing: FrontendTiming | None = None,
) -> tuple[int, list[tuple[bytes, bytes]], list[bytes | memoryview]]:
    """Run one infer request; returns status, headers and the body's parts. ``headers`` are read by
    lower-case name; ``sent`` are the headers as a forward pattern sees them (names as sent, if known)."""
    body = await read_body(receive, state, limits.max_input_size, watch, _refusal(headers))
    try:  # the model first, then the body's encoding: both text/plain, as Triton answers them
        model = dataplane.service.resolve(name, version, refuse_decoupled=DECOUPLED_ON_HTTP)
    except NaiadError as error:
        return http_status(error.code), TEXT_HEADERS, [error_body(error.message)]
    try:
        body = await decompress(body, headers.get("content-encoding"), limits.max_input_size)
    except NaiadError as error:
        unknown_encoding = error.code is ErrorCode.UNSUPPORTED
        return (
            http_status(error.code),
            _ENCODINGS_TAKEN if unknown_encoding else TEXT_HEADERS,
            [error_body(error.message)],
        )
    if timing is not None:
        timing.received()
    length = header_length(headers.get("inference-header-content-length"))
    decoded = codec.decode_request(body, length, name, model.signature, limits.max_input_size, dataplane.shared_memory)
    del body  # the tensors hold views of it
    inference = dataplane.infer_event(
        model,
        decoded.inputs,
        outputs=decoded.outputs,
        request_id=decoded.id,
        parameters=with_headers(dataplane.http_headers, decoded.parameters, sent),
        frontend=timing,
    )
    event = await until_disconnected(receive, inference, channel)
    decoded.inputs = []  # the request's data is no longer needed while the response is encoded and sent
    try:  # the model's failure, or an answer that cannot be written: text/plain, as Triton answers them
        response = single_response(event, model.name)
        return 200, *encoded_answer(response, model, decoded, headers.get("accept-encoding", ""))
    except NaiadError as error:
        return http_status(error.code), TEXT_HEADERS, [error_body(error.message)]


def encoded_answer(
    response: InferenceResponse, model: ServingModel, decoded: codec.DecodedRequest, accept_encoding: str
) -> tuple[list[tuple[bytes, bytes]], list[bytes | memoryview]]:
    """A successful infer response's headers and body parts, compressed as the client accepts."""
    payload, json_length = codec.encode_response(
        response, model_name=model.name, model_version=model.version, request=decoded
    )
    headers = list(JSON_HEADERS if json_length is None else _BINARY_HEADERS)
    if json_length is not None:
        headers.append((b"inference-header-content-length", str(json_length).encode()))
    encoding = pick_encoding(accept_encoding)
    if encoding:
        whole = b"".join(payload)
        payload = [gzip.compress(whole, 1) if encoding == "gzip" else zlib.compress(whole, 1)]
        headers.append((b"content-encoding", encoding.encode()))
    return headers, payload


def _refusal(headers: dict[str, str]) -> Callable[[int, int], str]:
    """Triton's words for a body over the limit: a JSON body, a raw binary one, or any other."""
    if headers.get("content-encoding", "identity") != "identity":
        return too_large
    header_length = headers.get("inference-header-content-length")
    if header_length is None:
        return lambda size, limit: too_large(size, limit, "request JSON")
    return raw_too_large if header_length.strip() == "0" else too_large


def header_length(value: str | None) -> int | None:
    """The Inference-Header-Content-Length header's value, read as C's ``atoi`` reads it (as Triton
    does): leading digits with an optional sign, 0 when there are none, which asks for raw data."""
    if value is None:
        return None
    match = _LEADING_INTEGER.match(value)
    return int(match[0]) if match else 0


_LEADING_INTEGER = re.compile(r"\s*[+-]?\d+")


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
