"""``--http-restricted-api``: which API group a path belongs to, and Triton's 403 for a call without the header.

The groups follow Triton's ``HTTPAPIServer::Handle``: a path is grouped whatever its method (Triton
checks the restriction before the method), and paths outside Triton's API (plugin routes, unknown
paths) belong to no group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from naiad.http.json_body import dump_json
from naiad.restrictions import ApiGroup, Restrictions

_MODEL = re.compile(
    r"/v2/models/[^/]+(?P<version>/versions/[0-9]+)?"
    r"(?:/(?P<kind>infer|generate|generate_stream|ready|config|stats|trace/setting))?"
)
_MODEL_KINDS = {
    None: ApiGroup.METADATA,
    "infer": ApiGroup.INFERENCE,
    "generate": ApiGroup.INFERENCE,
    "generate_stream": ApiGroup.INFERENCE,
    "ready": ApiGroup.HEALTH,
    "config": ApiGroup.MODEL_CONFIG,
    "stats": ApiGroup.STATISTICS,
    "trace/setting": ApiGroup.TRACE,
}
_EXACT = {
    "/v2/models/stats": ApiGroup.STATISTICS,
    "/v2/logging": ApiGroup.LOGGING,
    "/v2": ApiGroup.METADATA,
    "/v2/health/live": ApiGroup.HEALTH,
    "/v2/health/ready": ApiGroup.HEALTH,
    "/v2/trace/setting": ApiGroup.TRACE,
}
_SHARED_MEMORY = re.compile(r"/v2/(?:system|cuda)sharedmemory(?:/region/[^/]+)?/(?:status|register|unregister)")
_REPOSITORY = re.compile(r"/v2/repository(?:/[^/]+)?/(?:index|models/[^/]+/(?:load|unload))")
_PATTERNS = ((_SHARED_MEMORY, ApiGroup.SHARED_MEMORY), (_REPOSITORY, ApiGroup.MODEL_REPOSITORY))


def api_group(path: str) -> ApiGroup | None:
    """The restricted-API group of a request path, as Triton groups it (None: in no group)."""
    group = _EXACT.get(path)
    if group is not None:
        return group
    match = _MODEL.fullmatch(path)
    if match is not None and not (match["kind"] == "trace/setting" and match["version"]):
        return _MODEL_KINDS[match["kind"]]
    for pattern, group in _PATTERNS:
        if pattern.fullmatch(path):
            return group
    return None


def refusal(path: str, headers: Iterable[tuple[bytes, bytes]], restrictions: Restrictions) -> bytes | None:
    """Triton's 403 body when ``path`` is restricted and the request lacks the header or its value."""
    group = api_group(path)
    restriction = None if group is None else restrictions.get(group)
    if restriction is None:
        return None
    key = restriction.key.lower().encode("latin-1")
    value = next((given for name, given in headers if name == key), None)
    if value is not None and value.decode("latin-1") == restriction.value:
        return None
    message = f"This API is restricted, expecting header '{restriction.key}'"
    return dump_json({"error": message})
