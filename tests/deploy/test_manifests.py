"""deploy/'s YAML: it parses, it is valid for Kubernetes and KServe (offline), and its parts agree
with each other."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .manifests import DEPLOY, HELM_VALUES, YAML_FILES, documents, label, objects, objects_of_kind, only
from .schema_validation import (
    KSERVE_SCHEMAS,
    KUBERNETES_VERSIONS,
    is_kserve,
    validate_kserve,
    validate_kubernetes,
)

KUSTOMIZE = "kustomize.config.k8s.io/v1beta1"


def test_deploy_has_the_manifests() -> None:
    kinds = {document["kind"] for _, document in objects()}
    expected = {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "PersistentVolumeClaim"}
    assert kinds >= expected | {"ServingRuntime", "InferenceService", "Kustomization"}


@pytest.mark.parametrize("path", YAML_FILES, ids=label)
def test_every_yaml_file_parses_into_documents(path: Path) -> None:
    parsed = documents(path)
    assert parsed, f"{label(path)} has no YAML document"
    for document in parsed:
        assert isinstance(document, dict), f"{label(path)}: a document is not a mapping"
        if path not in HELM_VALUES:
            assert {"apiVersion", "kind", "metadata"} <= document.keys() or document["apiVersion"] == KUSTOMIZE


def _ids(value: Path | dict[str, Any]) -> str:
    return label(value) if isinstance(value, Path) else str(value["kind"])


KUBERNETES_OBJECTS = [
    (path, document) for path, document in objects() if not is_kserve(document) and document["apiVersion"] != KUSTOMIZE
]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(("path", "document"), KUBERNETES_OBJECTS, ids=_ids)
def test_kubernetes_objects_are_valid(path: Path, document: dict[str, Any], version: str) -> None:
    validate_kubernetes(document, version)


@pytest.mark.parametrize(("path", "document"), [entry for entry in objects() if is_kserve(entry[1])], ids=_ids)
def test_kserve_objects_are_valid(path: Path, document: dict[str, Any]) -> None:
    validate_kserve(document)


def test_vendored_kserve_schemas_name_their_source() -> None:
    for (api_version, kind), path in KSERVE_SCHEMAS.items():
        note = json.loads(path.read_text())["$comment"]
        source = r"(https://github\.com/kserve/kserve/blob/\1/\S+)"
        match = re.fullmatch(rf"KServe (v\d+\.\d+\.\d+): (\w+) openAPIV3Schema of {source}, unchanged\.", note)
        assert match, f"{label(path)}: $comment does not say which KServe release and file it is"
        assert api_version == f"serving.kserve.io/{match[2]}"
        assert match[3].endswith(f"serving.kserve.io_{kind.lower()}s.yaml")


def test_validation_refuses_unknown_fields_and_wrong_types() -> None:
    deployment = copy.deepcopy(only("Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["containerPorts"] = []
    with pytest.raises(jsonschema.ValidationError, match="containerPorts"):
        validate_kubernetes(deployment, KUBERNETES_VERSIONS[0])
    runtime = copy.deepcopy(only("ServingRuntime"))
    runtime["spec"]["supportedModelFormat"] = runtime["spec"].pop("supportedModelFormats")
    with pytest.raises(jsonschema.ValidationError, match="supportedModelFormat"):
        validate_kserve(runtime)
    service = copy.deepcopy(objects_of_kind("InferenceService")[0])
    service["spec"]["predictor"]["minReplicas"] = "one"
    with pytest.raises(jsonschema.ValidationError, match="'one' is not of type 'integer'"):
        validate_kserve(service)


def test_kustomization_lists_every_object_file() -> None:
    folder = DEPLOY / "kubernetes"
    (kustomization,) = documents(folder / "kustomization.yaml")
    object_files = {
        path.name for path in folder.glob("*.yaml") if path not in HELM_VALUES and path.name != "kustomization.yaml"
    }
    assert sorted(kustomization["resources"]) == sorted(object_files)


def test_selectors_and_references_match_the_deployment() -> None:
    deployment = only("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert only("Service")["spec"]["selector"].items() <= pod_labels.items()
    assert only("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    target = only("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert target == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    claim = only("PersistentVolumeClaim")["metadata"]["name"]
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert claim in [volume.get("persistentVolumeClaim", {}).get("claimName") for volume in volumes]
    for service in objects_of_kind("InferenceService"):
        assert service["spec"]["predictor"]["model"]["storageUri"] == f"pvc://{claim}"


def test_inference_services_ask_for_the_naiad_runtime_and_a_format_it_supports() -> None:
    runtime = only("ServingRuntime")
    formats = {(entry["name"], entry.get("version")) for entry in runtime["spec"]["supportedModelFormats"]}
    assert set(runtime["spec"]["protocolVersions"]) == {"v2", "grpc-v2"}
    for service in objects_of_kind("InferenceService"):
        model = service["spec"]["predictor"]["model"]
        assert model["runtime"] == runtime["metadata"]["name"]
        assert (model["modelFormat"]["name"], model["modelFormat"].get("version")) in formats
        assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]


def test_serving_runtime_reads_the_model_where_kserve_puts_it() -> None:
    (container,) = only("ServingRuntime")["spec"]["containers"]
    assert container["name"] == "kserve-container"
    assert "--model-repository=/mnt/models" in container["args"]
