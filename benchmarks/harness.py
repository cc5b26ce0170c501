"""Shared benchmark plumbing: perf_analyzer and a reference Triton, installed from PyPI on demand.

perf_analyzer ships inside the ``tritonclient[all]==2.51.0`` wheel (the last release that carries the
binary); it links libcudart, which the ``nvidia-cuda-runtime-cu12`` wheel provides, and libb64 from
Debian. Triton 2.51 itself (CPU, python backend only) ships inside the ``nvidia-pytriton==0.7.0``
wheel. Both are installed into virtual environments under ``$NAIAD_BENCH_HOME``
(default ``~/.cache/naiad-bench``) the first time a benchmark needs them.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOME = Path(os.environ.get("NAIAD_BENCH_HOME", Path.home() / ".cache" / "naiad-bench"))
PA_VENV = HOME / "pa-venv"
TRITON_VENV = HOME / "triton-venv"
TRITON_DIST = HOME / "triton-dist"


def _run(command: Sequence[str | os.PathLike[str]]) -> None:
    subprocess.run([str(part) for part in command], check=True)


def _venv(path: Path) -> Path:
    if not (path / "bin" / "python").exists():
        _run([sys.executable, "-m", "venv", path])
    return path / "bin"


def perf_analyzer() -> tuple[Path, dict[str, str]]:
    """The perf_analyzer binary and the environment it needs, installing both if missing."""
    binary = PA_VENV / "bin" / "perf_analyzer"
    if not binary.exists():
        if shutil.which("apt-get") and subprocess.run(["dpkg", "-s", "libb64-0d"], capture_output=True).returncode:
            _run(["apt-get", "update", "-qq"])
            _run(["apt-get", "install", "-y", "-qq", "libb64-0d"])
        bin_dir = _venv(PA_VENV)
        _run([bin_dir / "pip", "install", "-q", "tritonclient[all]==2.51.0", "nvidia-cuda-runtime-cu12==12.9.79"])
    python = PA_VENV / "bin" / "python"
    library = subprocess.run(
        [
            python,
            "-c",
            "import nvidia.cuda_runtime, os; print(os.path.join(list(nvidia.cuda_runtime.__path__)[0], 'lib'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(filter(None, [library, os.environ.get("LD_LIBRARY_PATH")]))}
    return binary, env


def triton_server() -> tuple[Path, dict[str, str], list[str]]:
    """The tritonserver binary, its environment, and the flags that point it at its backends."""
    if not (TRITON_DIST / "bin" / "tritonserver").exists():
        bin_dir = _venv(TRITON_VENV)
        _run([bin_dir / "pip", "install", "-q", "nvidia-pytriton==0.7.0"])
        site = subprocess.run(
            [bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        source = Path(site) / "pytriton" / "tritonserver"
        shutil.rmtree(TRITON_DIST, ignore_errors=True)
        TRITON_DIST.mkdir(parents=True)
        for part in ("bin", "backends", "caches"):
            shutil.copytree(source / part, TRITON_DIST / part)
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        shutil.copy(
            source / "python_backend_stubs" / version / "triton_python_backend_stub",
            TRITON_DIST / "backends" / "python",
        )
        (TRITON_DIST / "LIBS_PATH").write_text(str(Path(site) / "nvidia_pytriton.libs"))
    libdir = sysconfig.get_config_var("LIBDIR")
    env = {
        **os.environ,
        "PATH": f"{TRITON_VENV / 'bin'}:{os.environ['PATH']}",
        "LD_LIBRARY_PATH": ":".join(
            filter(None, [libdir, (TRITON_DIST / "LIBS_PATH").read_text().strip(), os.environ.get("LD_LIBRARY_PATH")])
        ),
    }
    flags = [
        f"--backend-directory={TRITON_DIST / 'backends'}",
        f"--cache-directory={TRITON_DIST / 'caches'}",
        "--allow-gpu-metrics=false",
    ]
    return TRITON_DIST / "bin" / "tritonserver", env, flags


def _wait_ready(http_port: int, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server on port {http_port} was not ready within {timeout} s")


@contextmanager
def reference_triton(repository: Path, ports: tuple[int, int, int], *extra_flags: str) -> Iterator[int]:
    """A real Triton 2.51 serving ``repository`` on 127.0.0.1 for the duration of the block; its pid."""
    binary, env, flags = triton_server()
    http, grpc, metrics = ports
    command = [
        str(binary),
        f"--model-repository={repository}",
        "--http-address=127.0.0.1",
        f"--http-port={http}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc}",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={metrics}",
        *flags,
        *extra_flags,
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(http, process)
        yield process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


@dataclass(frozen=True)
class Measurement:
    """perf_analyzer's numbers for one concurrency level."""

    throughput: float  # inferences per second
    p50_us: float
    p99_us: float
    cpu_us: float | None = None  # the server's CPU time per inference, its child processes included


def _parent_and_cpu_seconds(stat: Path) -> tuple[int, float]:
    """A ``/proc/<pid>/stat`` file's parent pid and user + system CPU seconds (its threads, not its children)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of one process (its threads, not its children)."""
    return _parent_and_cpu_seconds(Path(f"/proc/{pid}/stat"))[1]


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and every process below it (workers, stubs)."""
    children: dict[int, list[int]] = {}
    seconds: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent, seconds[int(entry.name)] = _parent_and_cpu_seconds(entry / "stat")
        except OSError:  # it ended meanwhile
            continue
        children.setdefault(parent, []).append(int(entry.name))
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        total += seconds.get(current, 0.0)
        pending += children.get(current, [])
    return total


def measure(
    model: str,
    url: str,
    protocol: str,
    concurrency: int,
    *,
    shape: str | None = None,
    interval_ms: int = 4000,
    server_pid: int | None = None,
) -> Measurement:
    """Run perf_analyzer once at one concurrency and read its CSV report. With ``server_pid``, also
    the CPU time the server (and its child processes) spent per inference: its CPU time over the run
    divided by the inferences the run's throughput makes of its duration."""
    binary, env = perf_analyzer()
    report = HOME / f"pa-{os.getpid()}.csv"
    command = [
        str(binary),
        "-m",
        model,
        "-u",
        url,
        "-i",
        protocol,
        f"--concurrency-range={concurrency}",
        f"--measurement-interval={interval_ms}",
        "--percentile=99",
        # Machines here are small and shared: perf_analyzer's stability check would reject most
        # runs, so every run is accepted after its minimum windows and callers take medians.
        "--stability-percentage=999",
        "--max-trials=3",
        "-f",
        str(report),
    ]
    if shape:
        command += ["--shape", shape]
    cpu_before, started = (tree_cpu_seconds(server_pid), time.monotonic()) if server_pid else (0.0, 0.0)
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"perf_analyzer failed ({' '.join(command)}):\n{result.stdout}\n{result.stderr}")
    with report.open() as handle:
        row = next(csv.DictReader(handle))
    report.unlink()
    throughput = float(row["Inferences/Second"])
    cpu_us = None
    if server_pid:
        inferences = throughput * (time.monotonic() - started)
        cpu_us = (tree_cpu_seconds(server_pid) - cpu_before) / inferences * 1e6
    return Measurement(throughput, float(row["p50 latency"]), float(row["p99 latency"]), cpu_us)


def median_of(runs: Sequence[Measurement]) -> Measurement:
    """The median of each number over repeated runs (machines here are noisy)."""
    cpu = [run.cpu_us for run in runs if run.cpu_us is not None]
    return Measurement(
        statistics.median(run.throughput for run in runs),
        statistics.median(run.p50_us for run in runs),
        statistics.median(run.p99_us for run in runs),
        statistics.median(cpu) if cpu else None,
    )


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A fixed-width table on stdout."""
    cells = [
        list(map(str, header)),
        *[[f"{cell:.2f}" if isinstance(cell, float) else str(cell) for cell in row] for row in rows],
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))
