"""Reading deploy/: its YAML documents, its Dockerfiles, and the naiad command line each one runs."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from naiad.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILES = sorted(DEPLOY.glob("Dockerfile*"))
YAML_FILES = sorted(path for pattern in ("*.yaml", "*.yml") for path in DEPLOY.rglob(pattern))
# YAML files that configure a tool rather than describe Kubernetes objects.
HELM_VALUES = {DEPLOY / "kubernetes" / "prometheus-adapter-values.yaml"}

# Container port names and the naiad port each one must be.
PORT_ROLES = {"http": "http", "http1": "http", "grpc": "grpc", "h2c": "grpc", "metrics": "metrics"}


def documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of ``path``."""
    return [document for document in yaml.safe_load_all(path.read_text()) if document is not None]


@cache
def objects() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object under deploy/, with the file it is in (shared: copy one to change it)."""
    return [(path, document) for path in YAML_FILES if path not in HELM_VALUES for document in documents(path)]


def objects_of_kind(kind: str) -> list[dict[str, Any]]:
    return [document for _, document in objects() if document["kind"] == kind]


def only(kind: str) -> dict[str, Any]:
    (found,) = objects_of_kind(kind)
    return found


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass
class NaiadCommand:
    """A ``naiad serve`` command line found in deploy/, and the ports it makes naiad listen on."""

    where: str
    args: list[str]

    def parsed(self) -> argparse.Namespace:
        """The arguments as ``naiad serve`` reads them."""
        try:
            return build_parser().parse_args(["serve", *self.args])
        except SystemExit:  # argparse has printed why
            raise AssertionError(f"{self.where}: `naiad serve` refuses {self.args} (its message is above)") from None

    def ports(self) -> dict[str, int]:
        parsed = self.parsed()
        return {"http": parsed.http_port, "grpc": parsed.grpc_port, "metrics": parsed.metrics_port}


def pod_containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a Deployment's pod template or of a ServingRuntime."""
    spec = document["spec"]
    return list(spec["template"]["spec"]["containers"] if document["kind"] == "Deployment" else spec["containers"])


def naiad_commands() -> list[NaiadCommand]:
    """The arguments of every container of deploy/'s Deployments and ServingRuntimes (each runs naiad),
    and each Dockerfile's default command."""
    found = [
        NaiadCommand(f"{label(path)} {document['kind']}/{container['name']}", list(container["args"]))
        for path, document in objects()
        if document["kind"] in ("Deployment", "ServingRuntime")
        for container in pod_containers(document)
    ]
    found += [NaiadCommand(label(path), dockerfile_instruction(path, "CMD")) for path in DOCKERFILES]
    return found


def dockerfile_instruction(path: Path, instruction: str) -> list[str]:
    """The exec-form (JSON array) value of the last ``instruction`` line of a Dockerfile."""
    lines = [line for line in path.read_text().splitlines() if line.startswith(f"{instruction} ")]
    assert lines, f"{label(path)} has no {instruction} line"
    value = json.loads(lines[-1].removeprefix(f"{instruction} "))
    assert isinstance(value, list), f"{label(path)}: {instruction} must be a JSON array (exec form)"
    return [str(item) for item in value]


def dockerfile_words(path: Path, instruction: str) -> list[str]:
    """The shell-form words of every ``instruction`` line of a Dockerfile (e.g. ``EXPOSE``'s ports)."""
    return [
        word
        for line in path.read_text().splitlines()
        if line.startswith(f"{instruction} ")
        for word in line.split()[1:]
    ]


def dockerfile_plugins(path: Path) -> dict[str, set[str]]:
    """The plugins a Dockerfile installs from plugins/, each with the extras it asks for."""
    return {
        match["name"]: set(filter(None, (match["extras"] or "").split(",")))
        for match in re.finditer(r"\./plugins/(?P<name>[\w-]+)(?:\[(?P<extras>[\w,-]+)\])?", path.read_text())
    }
