"""Reading ``config.pbtxt`` (protobuf text format) and JSON model configs.

Every failure is a :class:`~naiad.errors.NaiadError` with code INVALID_ARG whose
message names the model, the file and the line, and says what is wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

from google.protobuf import json_format, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from naiad.config import lenient_json
from naiad.errors import invalid_arg
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.suggestions import SuggestingError, close_matches, did_you_mean

__all__ = [
    "CONFIG_FILENAME",
    "ConfigParseError",
    "config_from_json",
    "config_path",
    "parse_model_config",
    "read_model_config",
]

CONFIG_FILENAME = "config.pbtxt"

_LOCATION_RE = re.compile(r"^\d+:\d+ : ")
_QUOTED_LINE_RE = re.compile(r"^'.*?': ", re.DOTALL)
_NO_FIELD_RE = re.compile(r'^Message type "([\w.]+)" has no field named "(\w+)"\.?$')
_NO_ENUM_RE = re.compile(r'^Enum type "([\w.]+)" has no value named (\w+)\.?$')
_MULTIPLE_RE = re.compile(r'^Message type "([\w.]+)" should not have multiple "(\w+)" fields\.?$')
_ONEOF_RE = re.compile(
    r'^Field "(\w+)" is specified along with field "(\w+)", another member of oneof "(\w+)"'
    r' for message type "([\w.]+)"\.?$'
)
_JSON_PATH_RE = re.compile(r' at "?([\w.\[\]]+?)"?\.*$')
_JSON_CHAIN_RE = re.compile(r"^(Failed to parse \w+ field: )+")


class ConfigParseError(SuggestingError):
    """A config file that is not valid protobuf text format.

    ``source`` is the file, ``line`` and ``column`` (1-based) where protobuf stopped, when it says;
    ``reason`` what is wrong, without the model and place; for an unknown field or enum value,
    ``name`` is it and ``suggestions`` the names close to it.
    """

    def __init__(
        self,
        reason: str,
        *,
        model_name: str,
        source: str,
        line: int | None,
        column: int | None,
        name: str = "",
        suggestions: tuple[str, ...] = (),
    ) -> None:
        where = _location(line, column)
        message = f"model '{model_name}': cannot parse {source}: {where}{reason}"
        super().__init__(message, name=name, suggestions=suggestions)
        self.reason = reason
        self.source = source
        self.line = line
        self.column = column


def read_model_config(model_dir: Path, *, model_name: str | None = None, config_name: str | None = None) -> ModelConfig:
    """Parse ``<model_dir>/config.pbtxt``; a missing file gives an empty ``ModelConfig``.

    *model_name* (default: the directory name) is only used in error messages.
    *config_name* selects ``<model_dir>/configs/<config_name>.pbtxt`` when that
    file exists (Triton's ``--model-config-name``).
    """
    name = model_name if model_name is not None else model_dir.name
    path = config_path(model_dir, config_name)
    if path is None:
        return ModelConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid_arg(f"model '{name}': cannot read {path}: {exc}") from exc
    return parse_model_config(text, model_name=name, source=str(path))


def config_path(model_dir: Path, config_name: str | None = None) -> Path | None:
    """The config file a model folder holds: ``configs/<config_name>.pbtxt`` where it exists (Triton's
    ``--model-config-name``), else ``config.pbtxt``; None when neither exists."""
    if config_name:
        custom = model_dir / "configs" / f"{config_name}.pbtxt"
        if custom.is_file():
            return custom
    path = model_dir / CONFIG_FILENAME
    return path if path.exists() else None


def parse_model_config(text: str, *, model_name: str, source: str = CONFIG_FILENAME) -> ModelConfig:
    """Parse protobuf text format *text* into a ``ModelConfig`` (errors name *model_name* and *source*)."""
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        reason, name, suggestions = _explain(str(exc))
        raise ConfigParseError(
            reason,
            model_name=model_name,
            source=source,
            line=exc.GetLine(),
            column=exc.GetColumn(),
            name=name,
            suggestions=suggestions,
        ) from None
    return config


def config_from_json(text: str | dict[str, Any]) -> ModelConfig:
    """Parse a JSON model config (load API): proto field names, enum names in any case, one value
    where a list is expected (``"instance_group": {...}``), single-quoted strings, unquoted keys and
    trailing commas, as Triton's parser takes them.

    Unknown fields are rejected.
    """
    if isinstance(text, str):
        try:
            data = lenient_json.loads(text)
        except json.JSONDecodeError as exc:
            raise invalid_arg(f"model config is not valid JSON: {exc}") from None
    else:
        data = text
    if not isinstance(data, dict):
        raise invalid_arg(f"model config JSON must be an object, got {type(data).__name__}")
    data = _fix_enum_case(data, cast(Descriptor, ModelConfig.DESCRIPTOR))
    config = ModelConfig()
    try:
        json_format.ParseDict(data, config)
    except json_format.ParseError as exc:
        raise invalid_arg(f"invalid JSON model config: {_explain_json(str(exc))}") from None
    return config


def _location(line: int | None, column: int | None) -> str:
    if line is None:
        return ""
    if column is None:
        return f"line {line}: "
    return f"line {line}, column {column}: "


def _explain(raw: str) -> tuple[str, str, tuple[str, ...]]:
    """Protobuf's text-format error as a short, readable sentence; an unknown name in it, and the names it
    may have meant."""
    message = _QUOTED_LINE_RE.sub("", _LOCATION_RE.sub("", raw.strip()))
    pool = ModelConfig.DESCRIPTOR.file.pool
    if match := _NO_FIELD_RE.match(message):
        suggestions = close_matches(match[2], pool.FindMessageTypeByName(match[1]).fields_by_name)
        return _with_guess(f"no field named '{match[2]}' in {match[1]}", suggestions), match[2], suggestions
    if match := _NO_ENUM_RE.match(message):
        values = [value.name for value in pool.FindEnumTypeByName(match[1]).values]
        suggestions = close_matches(match[2], values)
        if suggestions:
            return _with_guess(f"'{match[2]}' is not a value of {match[1]}", suggestions), match[2], suggestions
        return f"'{match[2]}' is not a value of {match[1]} (valid: {', '.join(values)})", match[2], ()
    if match := _MULTIPLE_RE.match(message):
        return f"field '{match[2]}' of {match[1]} is set more than once", "", ()
    if match := _ONEOF_RE.match(message):
        pair = f"'{match[1]}' and '{match[2]}'"
        return f"{pair} cannot both be set (they are alternatives of '{match[3]}' in {match[4]})", "", ()
    return (message[0].lower() + message[1:] if message[:1].isupper() else message), "", ()


def _with_guess(reason: str, suggestions: tuple[str, ...]) -> str:
    return f"{reason}; {did_you_mean(suggestions)}" if suggestions else reason


def _explain_json(raw: str) -> str:
    """Shorten json_format's nested "Failed to parse x field: ..." chains."""
    message = raw.splitlines()[0].strip()
    path = ""
    if match := _JSON_PATH_RE.search(message):
        path = match[1].removeprefix("ModelConfig").lstrip(".")
        message = message[: match.start()]
    if chain := _JSON_CHAIN_RE.match(message):
        path = path or ".".join(re.findall(r"Failed to parse (\w+) field", chain[0]))
        message = message[chain.end() :]
    message = message.rstrip(".")
    if match := _NO_FIELD_RE.match(message + "."):
        message = f"no field named '{match[2]}' in {match[1]}"
    return f"{path}: {message}" if path else message


def _fix_enum_case(data: Any, descriptor: Descriptor) -> Any:
    """Return a copy of *data* with enum names upper-cased to the declared spelling."""
    if not isinstance(data, dict):
        return data
    fields = {name: f for f in descriptor.fields for name in (f.camelcase_name, f.name)}
    fixed: dict[str, Any] = {}
    for key, value in data.items():
        field = fields.get(key)
        fixed[key] = value if field is None else _fix_field(field, value)
    return fixed


def _fix_field(field: FieldDescriptor, value: Any) -> Any:
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        value_field = message_type.fields_by_name["value"]
        if isinstance(value, dict):
            return {k: _fix_single(value_field, v) for k, v in value.items()}
        return value
    if field.is_repeated and isinstance(value, list):
        return [_fix_single(field, v) for v in value]
    if field.is_repeated and value is not None:  # one value for a repeated field: Triton's parser takes it
        return [_fix_single(field, value)]
    return _fix_single(field, value)


def _fix_single(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        return _fix_enum_case(value, field.message_type)
    if field.enum_type is not None and isinstance(value, str):
        for enum_value in field.enum_type.values:
            if enum_value.name.lower() == value.lower():
                return enum_value.name
    return value
