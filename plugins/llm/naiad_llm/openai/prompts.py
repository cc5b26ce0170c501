"""Prompts from requests: chat messages through the model's chat template, and token counts."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from naiad_llm.openai.errors import invalid
from naiad_llm.openai.target import Target

_ROLES = ("system", "developer", "user", "assistant", "tool")


def render_chat(target: Target, messages: object, tools: list[dict[str, Any]] | None) -> str:
    """The prompt for ``messages`` (and ``tools``) in the model's chat template, ready for the reply."""
    tokenizer = target.tokenizer
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise invalid(
            f"model '{target.name}' has no chat template, so it cannot serve chat completions; "
            "use /v1/completions with a prompt instead",
            "model",
        )
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty list of messages", "messages")
    conversation = [_message(message, index) for index, message in enumerate(messages)]
    try:
        prompt = tokenizer.apply_chat_template(conversation, tools=tools, add_generation_prompt=True, tokenize=False)
    except Exception as error:  # the template's own checks (roles that must alternate, ...) raise anything
        raise invalid(f"the chat template of model '{target.name}' refused the messages: {error}", "messages") from None
    return str(prompt)


def count_tokens(target: Target, text: str, *, special: bool = True) -> int | None:
    """How many tokens ``text`` is for the model (with the special tokens the tokenizer adds to a prompt
    when ``special``); None without a tokenizer."""
    if target.tokenizer is None:
        return None
    return len(target.tokenizer.encode(text, add_special_tokens=special))


def _message(message: object, index: int) -> dict[str, Any]:
    param = f"messages[{index}]"
    if not isinstance(message, dict) or message.get("role") not in _ROLES:
        raise invalid(f"{param} must be an object whose 'role' is one of {', '.join(_ROLES)}", param)
    role = "system" if message["role"] == "developer" else message["role"]
    rendered: dict[str, Any] = {"role": role, "content": _content(message.get("content"), param)}
    for key in ("name", "tool_call_id"):
        if isinstance(message.get(key), str):
            rendered[key] = message[key]
    if role == "assistant" and message.get("tool_calls"):
        rendered["tool_calls"] = [_tool_call(call, f"{param}.tool_calls") for call in message["tool_calls"]]
    return rendered


def _content(content: object, param: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        if len(texts) == len(content) and all(isinstance(text, str) for text in texts):
            return "\n".join(str(text) for text in texts)
    raise invalid(f"{param}.content must be a string or a list of text parts; this model takes text only", param)


def _tool_call(call: object, param: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise invalid(f"{param} must hold tool calls with a 'function' that has a 'name'", param)
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):  # templates print the arguments as JSON themselves
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return {**call, "function": {"name": function["name"], "arguments": arguments}}
