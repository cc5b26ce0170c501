"""Running ``naiad serve`` as a real process on free ports."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from naiad.testing.ports import free_ports

STARTED_MARKERS = ("is ready:", "is serving but not ready:")
"""The last startup line: every model loaded, or some unavailable (strict readiness then answers 400)."""


class ServerStartError(RuntimeError):
    """The server process did not come up; the message carries its log."""


@dataclass
class ServerProcess:
    """A running server process and where to reach it."""

    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    metrics_port: int
    log_path: Path

    @property
    def http_url(self) -> str:
        """``host:port`` as tritonclient.http expects it."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for exit; returns the exit code (kills after ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_server(
    repositories: Sequence[Path],
    *extra_args: str,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    program: Sequence[str] = (sys.executable, "-m", "naiad"),
) -> ServerProcess:
    """Start ``python -m naiad serve`` on free ports and wait until it has loaded its models (or failed to).

    ``program`` runs naiad, by default from this interpreter (another environment's: ``[".../bin/naiad"]``).
    """
    http_port, grpc_port, metrics_port = free_ports(3)
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115
        prefix="naiad-server-", suffix=".log", dir=_log_directory(), delete=False
    )
    command = [
        *program,
        "serve",
        *(f"--model-repository={repository}" for repository in repositories),
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        f"--http-port={http_port}",
        f"--grpc-port={grpc_port}",
        f"--metrics-port={metrics_port}",
        *extra_args,
    ]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    log.close()
    server = ServerProcess(process, http_port, grpc_port, metrics_port, Path(log.name))
    # With --log-file the log (and the ready line) goes there instead of the process output.
    log_files = [Path(arg.partition("=")[2]) for arg in extra_args if arg.startswith("--log-file=")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerStartError(f"naiad exited with code {process.returncode}:\n{server.logs()}")
        if _ready_logged(server, log_files) and _live(http_port):
            return server
        time.sleep(0.05)
    server.stop(5, signal.SIGKILL)
    raise ServerStartError(f"naiad did not become ready within {timeout} s:\n{server.logs()}")


@functools.cache
def _log_directory() -> Path:
    """Where server logs go: ``$NAIAD_TEST_LOG_DIR`` (kept), else a folder removed when this process exits."""
    kept = os.environ.get("NAIAD_TEST_LOG_DIR")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    directory = tempfile.mkdtemp(prefix="naiad-server-logs-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return Path(directory)


def _ready_logged(server: ServerProcess, log_files: list[Path]) -> bool:
    if _started(server.logs()):
        return True
    return any(path.is_file() and _started(path.read_text(errors="replace")) for path in log_files)


def _started(log: str) -> bool:
    return any(marker in log for marker in STARTED_MARKERS)


def _live(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/live", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
