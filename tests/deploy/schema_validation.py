"""Offline schema validation of deploy/'s objects: Kubernetes kinds with kubernetes-validate, KServe's
with the vendored CRD schemas (schemas/, see schemas/update.py)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

SCHEMAS = Path(__file__).resolve().parent / "schemas"
KSERVE_SCHEMAS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): SCHEMAS / "servingruntime.json",
    ("serving.kserve.io/v1beta1", "InferenceService"): SCHEMAS / "inferenceservice.json",
}
# The oldest Kubernetes the manifests are meant for, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.latest_version())
# Schema keywords whose values are data, not schemas.
_NOT_SCHEMAS = {"properties", "required", "enum", "default", "example", "x-kubernetes-validations"}


def validate_kubernetes(document: dict[str, Any], version: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` is valid for that Kubernetes version,
    unknown fields included (as ``kubectl apply --validate=strict``)."""
    kubernetes_validate.validate(document, version, strict=True)


def validate_kserve(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` is valid for KServe's CRD schema, with
    unknown fields refused as the API server's strict field validation does."""
    _kserve_validator(document["apiVersion"], document["kind"]).validate(document)


def is_kserve(document: dict[str, Any]) -> bool:
    return (document["apiVersion"], document["kind"]) in KSERVE_SCHEMAS


@cache
def _kserve_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    schema = json.loads(KSERVE_SCHEMAS[(api_version, kind)].read_text())
    # OpenAPI v3 schemas in CRDs use only keywords JSON Schema 2020-12 reads the same way.
    closed = _closed(schema)
    return jsonschema.Draft202012Validator(closed)


def _closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others, except where the CRD
    keeps unknown fields (``x-kubernetes-preserve-unknown-fields``) or types extra ones."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: value if key in _NOT_SCHEMAS else _closed(value) for key, value in schema.items()}
    if "properties" in schema:
        closed["properties"] = {name: _closed(value) for name, value in schema["properties"].items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed
