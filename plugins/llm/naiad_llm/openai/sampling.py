"""OpenAI request fields as vLLM ``SamplingParams`` names, validated as OpenAI validates them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from naiad_llm.openai.errors import invalid
from naiad_llm.openai.target import Target
from naiad_llm.openai.transport import flag

# Fields outside OpenAI's API that vLLM's OpenAI server also takes (clients send them as extra_body).
_EXTRA_NUMBERS: dict[str, tuple[float, float | None, bool]] = {
    "top_k": (-1, None, True),
    "min_p": (0.0, 1.0, False),
    "repetition_penalty": (0.0, None, False),
    "min_tokens": (0, None, True),
}


def sampling_parameters(body: Mapping[str, Any], *max_tokens_fields: str) -> dict[str, Any]:
    """The ``sampling_parameters`` a request asks for (``max_tokens`` only when it names one)."""
    parameters: dict[str, Any] = {}
    for field in max_tokens_fields:
        if body.get(field) is not None:
            parameters["max_tokens"] = _number(body, field, 1, None, integer=True)
            break
    n = body.get("n")
    parameters["n"] = 1 if n is None else _number(body, "n", 1, 128, integer=True)
    for field, low, top in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        if body.get(field) is not None:
            parameters[field] = _number(body, field, low, top)
    if parameters.get("top_p") == 0:
        raise invalid("top_p must be in (0, 1]", "top_p")
    for field in ("presence_penalty", "frequency_penalty"):
        if body.get(field):  # 0 is the default: engines without penalties need not see it
            parameters[field] = _number(body, field, -2.0, 2.0)
    for field, (low, high, integer) in _EXTRA_NUMBERS.items():
        if body.get(field) is not None:
            parameters[field] = _number(body, field, low, high, integer=integer)
    if body.get("seed") is not None:
        parameters["seed"] = _number(body, "seed", None, None, integer=True)
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, list) or not all(isinstance(item, str) and item for item in stops):
            raise invalid("'stop' must be a string or a list of non-empty strings", "stop")
        parameters["stop"] = stops
    token_ids = body.get("stop_token_ids")
    if token_ids is not None:
        if not isinstance(token_ids, list) or not all(_is_int(item) for item in token_ids):
            raise invalid("'stop_token_ids' must be a list of integers", "stop_token_ids")
        parameters["stop_token_ids"] = token_ids
    if body.get("ignore_eos") is not None:
        parameters["ignore_eos"] = _flag(body, "ignore_eos")
    if body.get("logit_bias"):  # refused rather than ignored: the caller would think it applied
        raise invalid("'logit_bias' is not supported: naiad's engines take no per-token biases", "logit_bias")
    return parameters


def stream_settings(body: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the answer streams, and whether its last chunk carries ``usage``
    (``stream_options.include_usage``, which OpenAI allows only with ``stream``)."""
    stream = flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and not stream:
        raise invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options")
    return stream, isinstance(options, dict) and options.get("include_usage") is True


def json_schema(body: Mapping[str, Any], target: Target) -> dict[str, Any] | None:
    """The JSON schema ``response_format`` asks the output to follow (``{}``: any JSON object), if any."""
    response_format = body.get("response_format")
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        schema: Any = {}
    elif kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema", {}) if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise invalid("response_format.json_schema must be an object with a 'schema' object", "response_format")
    else:
        raise invalid("response_format.type must be 'text', 'json_object' or 'json_schema'", "response_format")
    if not target.enforces_json_schema:
        raise invalid(
            f"model '{target.name}' cannot follow response_format '{kind}': its engine does not constrain "
            "decoding to a JSON schema",
            "response_format",
        )
    return dict(schema)


def fit_max_tokens(parameters: dict[str, Any], prompt_tokens: int | None, target: Target, param: str) -> None:
    """Default ``max_tokens`` to what the context leaves; refuse prompts and requests that do not fit."""
    limit = target.max_model_len
    if limit is None or prompt_tokens is None:
        return
    requested: int | None = parameters.get("max_tokens")
    if requested is not None and prompt_tokens + requested > limit:
        raise invalid(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + requested} tokens ({prompt_tokens} in the prompt, {requested} in the completion). "
            "Please reduce the length of the prompt or of the completion.",
            param,
        )
    if prompt_tokens >= limit:
        raise invalid(
            f"This model's maximum context length is {limit} tokens. However, your prompt is {prompt_tokens} "
            "tokens, which leaves none to generate. Please reduce the length of the prompt.",
            param,
        )
    if requested is None:
        parameters["max_tokens"] = limit - prompt_tokens


def _number(
    body: Mapping[str, Any], field: str, low: float | None, high: float | None, *, integer: bool = False
) -> Any:
    value = body[field]
    if not (_is_int(value) if integer else isinstance(value, int | float) and not isinstance(value, bool)):
        raise invalid(f"'{field}' must be {'an integer' if integer else 'a number'}", field)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise invalid(f"'{field}' must be {bounds}, got {value}", field)
    return value


def _flag(body: Mapping[str, Any], field: str) -> bool:
    value = body[field]
    if not isinstance(value, bool):
        raise invalid(f"'{field}' must be a boolean", field)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
