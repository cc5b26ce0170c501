"""OpenVINO's usage telemetry, kept out of the server process.

``import openvino`` imports its model converter, which reports the import to Intel's analytics service
(package ``openvino_telemetry``) unless the user opted out, from a process it forks for the purpose.
A server must neither send usage data unasked nor fork while its gRPC and HTTP threads run (gRPC logs
``fork_posix.cc ... skipping fork() handlers`` when it happens, and a forked copy of a threaded
process can deadlock). OpenVINO falls back to a no-op stub when the package cannot be imported.
"""

from __future__ import annotations

import sys

TELEMETRY_PACKAGE = "openvino_telemetry"


def keep_telemetry_off() -> None:
    """Make ``openvino_telemetry`` unimportable (a ``None`` entry in ``sys.modules`` makes an import raise
    ImportError), before OpenVINO is first imported; a no-op once it was imported some other way."""
    if TELEMETRY_PACKAGE not in sys.modules:
        sys.modules[TELEMETRY_PACKAGE] = None  # type: ignore[assignment]
