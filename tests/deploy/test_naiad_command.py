"""Every ``naiad serve`` command line in deploy/ uses real flags, and every port, probe and scrape
target around it points at a port that command makes naiad listen on."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from .manifests import (
    DOCKERFILES,
    PORT_ROLES,
    NaiadCommand,
    dockerfile_instruction,
    dockerfile_words,
    label,
    naiad_commands,
    objects_of_kind,
    only,
    pod_containers,
)

COMMANDS = naiad_commands()


@cache
def serve_help() -> str:
    """What the real ``naiad serve --help`` prints."""
    result = subprocess.run(
        [sys.executable, "-m", "naiad", "serve", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout


def test_every_naiad_container_and_dockerfile_was_found() -> None:
    assert len(COMMANDS) == len(objects_of_kind("Deployment")) + len(objects_of_kind("ServingRuntime")) + 2
    assert len(DOCKERFILES) == 2


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.where)
def test_every_flag_is_in_naiad_serve_help(command: NaiadCommand) -> None:
    flags = [arg.partition("=")[0] for arg in command.args]
    assert flags, f"{command.where}: no arguments"
    assert all(flag.startswith("--") for flag in flags), f"{command.where}: write flags as --flag=value"
    known = set(re.findall(r"--[a-z0-9][a-z0-9-]*", serve_help()))
    assert "--model-repository" in known
    assert [flag for flag in flags if flag not in known] == [], f"{command.where}: not flags of `naiad serve`"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.where)
def test_every_value_is_one_naiad_serve_accepts(command: NaiadCommand) -> None:
    parsed = command.parsed()
    assert parsed.command == "serve"
    assert parsed.model_repository


@pytest.mark.parametrize("path", DOCKERFILES, ids=label)
def test_dockerfile_runs_naiad_serve_on_the_ports_it_exposes(path: Path) -> None:
    assert dockerfile_instruction(path, "ENTRYPOINT") == ["naiad", "serve"]
    (command,) = [command for command in COMMANDS if command.where == label(path)]
    assert command.parsed().model_repository == [Path("/models")]
    exposed = {int(port) for port in dockerfile_words(path, "EXPOSE")}
    assert exposed == set(command.ports().values())


def _container_ports(container: dict[str, Any], command: NaiadCommand) -> dict[str, int]:
    """The container's named ports, each checked against the naiad port its name says it is."""
    named = {}
    for port in container.get("ports", []):
        role = PORT_ROLES.get(port["name"])
        assert role is not None, f"{command.where}: port name {port['name']!r} is not one of {sorted(PORT_ROLES)}"
        assert port["containerPort"] == command.ports()[role], f"{command.where}: port {port['name']!r}"
        named[port["name"]] = port["containerPort"]
    return named


def _resolve(port: int | str, named: dict[str, int]) -> int:
    return named[port] if isinstance(port, str) else port


def test_deployment_ports_probes_service_and_scrape_target_agree_with_its_args() -> None:
    deployment = only("Deployment")
    (container,) = pod_containers(deployment)
    (command,) = [command for command in COMMANDS if command.where.endswith(f"Deployment/{container['name']}")]
    ports = command.ports()
    named = _container_ports(container, command)
    assert set(named.values()) == set(ports.values())
    _check_probes(container, named, ports["http"])
    for service_port in only("Service")["spec"]["ports"]:
        target = _resolve(service_port["targetPort"], named)
        assert target == ports[PORT_ROLES[service_port["name"]]], f"Service port {service_port['name']!r}"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert annotations["prometheus.io/path"] == "/metrics"


def test_serving_runtime_probes_and_scrape_target_agree_with_its_args() -> None:
    runtime = only("ServingRuntime")
    (container,) = pod_containers(runtime)
    (command,) = [command for command in COMMANDS if "ServingRuntime/" in command.where]
    ports = command.ports()
    # KServe sends REST to 8080; gRPC InferenceServices use 9000, as with Triton's runtime.
    assert (ports["http"], ports["grpc"]) == (8080, 9000)
    _check_probes(container, _container_ports(container, command), ports["http"])
    assert int(runtime["spec"]["annotations"]["prometheus.kserve.io/port"]) == ports["metrics"]
    assert runtime["spec"]["annotations"]["prometheus.kserve.io/path"] == "/metrics"
    for service in objects_of_kind("InferenceService"):
        predictor = service["spec"]["predictor"]
        _container_ports(predictor["model"], command)
        if "prometheus.io/port" in predictor.get("annotations", {}):
            assert int(predictor["annotations"]["prometheus.io/port"]) == ports["metrics"]


def _check_probes(container: dict[str, Any], named: dict[str, int], http_port: int) -> None:
    paths = {}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert _resolve(get["port"], named) == http_port, f"{probe} must ask naiad's HTTP port"
        paths[probe] = get["path"]
    assert paths == {
        "startupProbe": "/v2/health/ready",
        "livenessProbe": "/v2/health/live",
        "readinessProbe": "/v2/health/ready",
    }
