"""The SDK's public surface is pinned, and the plugins in this repository use nothing else of naiad."""

from __future__ import annotations

import ast
from pathlib import Path

import naiad
import naiad.backend
import naiad.embedded
import naiad.testing

ROOT = Path(__file__).resolve().parents[2]

SDK = [
    "DEFAULT_MAX_BATCH_SIZE",
    "SEQUENCE_END",
    "SEQUENCE_START",
    "Arrays",
    "BackendContext",
    "BackendInfo",
    "BackendModel",
    "BlockingSink",
    "CallbackSink",
    "CancellationToken",
    "Capabilities",
    "DataType",
    "ErrorCode",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceContext",
    "InstanceRunner",
    "LoopSink",
    "MemoryKind",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "ModelConfig",
    "ModelFormat",
    "ModelInput",
    "ModelInstance",
    "ModelInstanceGroup",
    "ModelLoadContext",
    "ModelOutput",
    "ModelParameter",
    "ModelSequenceBatching",
    "NaiadError",
    "OnDisk",
    "OutputDestination",
    "ParameterValue",
    "RequestedOutput",
    "ResponseEvent",
    "ResponseSender",
    "ResponseSink",
    "ResponseStage",
    "Scheduler",
    "SchedulerContext",
    "Scheduling",
    "ServerHandle",
    "ServingModel",
    "SuggestingError",
    "Tensor",
    "TensorInstance",
    "build_scheduler",
    "close_matches",
    "config_from_json",
    "config_to_json",
    "config_to_json_dict",
    "control_datatype",
    "datatypes",
    "describe_exit",
    "fill_load_defaults",
    "gpu_count",
    "hookimpl",
    "invalid_arg",
    "new_event_loop",
    "not_found",
    "parse_model_config",
    "report_compute",
    "request_prefix",
    "settle_heap",
    "unavailable",
    "unsupported",
    "wire_array",
]

TESTING = [
    "LoadedModel",
    "ModelRepositoryBuilder",
    "ResponseCollector",
    "ServerProcess",
    "ThreadedServer",
    "free_ports",
    "infer_through_shared_memory",
    "load_model",
    "python_identity",
    "serve_in_thread",
    "start_server",
    "tensors",
]

TOP_LEVEL = [
    "AsyncResponseStream",
    "ErrorCode",
    "NaiadError",
    "Response",
    "ResponseStream",
    "Server",
    "Tensor",
    "__version__",
    "hookimpl",
]

EMBEDDED = ["AsyncResponseStream", "Inputs", "Response", "ResponseStream", "Server"]

PUBLIC_MODULES = {"naiad", "naiad.backend", "naiad.embedded", "naiad.testing"}


def test_the_sdk_exports_exactly_its_pinned_names() -> None:
    assert naiad.backend.__all__ == SDK
    assert all(hasattr(naiad.backend, name) for name in SDK)


def test_the_testing_helpers_are_pinned() -> None:
    assert naiad.testing.__all__ == TESTING


def test_the_package_exports_are_pinned() -> None:
    assert naiad.__all__ == TOP_LEVEL
    assert all(hasattr(naiad, name) for name in TOP_LEVEL)
    assert naiad.Server is naiad.embedded.Server
    assert naiad.Tensor is naiad.backend.Tensor
    assert naiad.NaiadError is naiad.backend.NaiadError


def test_the_in_process_api_is_pinned() -> None:
    assert naiad.embedded.__all__ == EMBEDDED


def _naiad_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a naiad module; ``from naiad import x`` counts as ``naiad.x``
    unless ``x`` is one of the package's own exports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "naiad":
            found.extend(
                (node.lineno, "naiad" if alias.name in naiad.__all__ else f"naiad.{alias.name}") for alias in node.names
            )
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("naiad."):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "naiad")
    return found


def test_plugins_import_only_the_public_api() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted((ROOT / "plugins").rglob("*.py"))
        for line, module in _naiad_imports(path)
        if module not in PUBLIC_MODULES
    ]
    assert offenders == []
