"""The ``naiad`` command line, with ``tritonserver``'s flag names."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from naiad import __version__
from naiad.check.command import add_check_command, run_check
from naiad.cli_help import SERVE_EPILOG, SERVE_USAGE, ServeHelpFormatter
from naiad.cli_triton import (
    add_triton_arguments,
    deprecated_trace_entries,
    deprecated_trace_warnings,
    no_effect_notes,
    refusal,
)
from naiad.event_loop import new_event_loop
from naiad.file_limits import raise_open_file_limit
from naiad.grpc import GrpcSettings
from naiad.grpc.serving import COMPRESSION_LEVELS
from naiad.grpc.tls import tls_from_flags
from naiad.header_forwarding import HeaderForwarding
from naiad.heap import settle as settle_heap
from naiad.http.serving import HTTP_SERVERS
from naiad.lifecycle import DEFAULT_LOAD_THREADS, DEFAULT_UNLOAD_TIMEOUT
from naiad.limits import DEFAULT_MAX_INSTANCES_PER_MODEL, MAX_GRPC_MESSAGE_SIZE, GrpcLimits, HttpLimits
from naiad.logs import LOG_FORMATS, canonical_format, configure_logging
from naiad.memory import return_large_blocks_to_os
from naiad.metrics.config import MetricsOptions, apply_metrics_config
from naiad.plugins import DEFAULT_BACKEND_DIRECTORY, DEFAULT_MAX_BATCH_SIZE_KEY
from naiad.response_cache import parse_cache_config
from naiad.restrictions import GRPC_KEY_PREFIX, parse_restrictions
from naiad.scheduling.rate_limiter import parse_resource
from naiad.server import Server, ServerOptions, StartupError
from naiad.trace_settings import TraceSettings, parse_trace_config
from naiad.tracing import trace_path_writable

logger = logging.getLogger("naiad")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"'{value}' is not a boolean: use true or false (1/0, yes/no, on/off)")


def _port(value: str) -> int:
    port = _whole_number(value)
    if port is None or not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"'{value}' is not a port number (0-65535)")
    return port


def _whole_number(value: str) -> int | None:
    """``value`` as an int, or None when it is not one (the caller says what was expected)."""
    try:
        return int(value)
    except ValueError:
        return None


def _backend_setting(value: str) -> tuple[str, str, str]:
    """``<backend>,<key>=<value>``, or ``<key>=<value>`` for every backend (backend ``""``)."""
    backend, comma, setting = value.partition(",")
    if not comma or "=" in backend:
        backend, setting = "", value
    key, equals, setting_value = setting.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected [<backend>,]<key>=<value>, got '{value}'")
    if key == DEFAULT_MAX_BATCH_SIZE_KEY:
        try:
            int(setting_value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{DEFAULT_MAX_BATCH_SIZE_KEY} must be an integer, got '{setting_value}' in '{value}'"
            ) from None
    return backend, key, setting_value


def _header_forwarding(pattern: str) -> HeaderForwarding:
    try:
        return HeaderForwarding(pattern)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _config_name(value: str) -> str:
    if not value:  # as Triton refuses it; leave the flag out to read each model's config.pbtxt
        raise argparse.ArgumentTypeError("empty argument for --model-config-name")
    if any(character.isspace() or character in "/\\" for character in value):
        raise argparse.ArgumentTypeError(f"'{value}' is not a config name: a file name without spaces or slashes")
    return value


def _address(value: str) -> str:
    """A listening address; an IPv6 one may come in brackets (``[::1]``, as Triton's gRPC address takes it)."""
    return value[1:-1] if value.startswith("[") and value.endswith("]") else value


def _resource(value: str) -> tuple[tuple[str, int], int]:
    try:
        return parse_resource(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="naiad", description="Serve Triton model repositories over KServe v2.")
    parser.add_argument("--version", action="version", version=f"naiad {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve one or more model repositories",
        usage=SERVE_USAGE,
        description="Serve Triton model repositories over KServe v2 HTTP/REST and gRPC.",
        epilog=SERVE_EPILOG,
        formatter_class=ServeHelpFormatter,
    )
    serve.add_argument(
        "--model-repository",
        "--model-store",
        dest="model_repository",
        action="append",
        required=True,
        type=Path,
        metavar="DIR",
        help="model repository folder (repeatable)",
    )
    serve.add_argument("--http-port", type=_port, default=8000, metavar="PORT", help="HTTP/REST port")
    serve.add_argument(
        "--http-address", type=_address, default="0.0.0.0", metavar="ADDR", help="address the HTTP frontend listens on"
    )
    serve.add_argument("--grpc-port", type=_port, default=8001, metavar="PORT", help="gRPC port")
    serve.add_argument(
        "--metrics-port", type=_port, default=8002, metavar="PORT", help="port of the Prometheus /metrics listener"
    )
    serve.add_argument("--id", default="triton", metavar="ID", help="the server's name in the server metadata")
    for protocol, what in (("http", "HTTP headers"), ("grpc", "gRPC metadata")):
        serve.add_argument(
            f"--{protocol}-header-forward-pattern",
            type=_header_forwarding,
            default=None,
            metavar="REGEX",
            help=f"{what} whose name matches (anywhere, any case) reach models as request parameters",
        )
    serve.add_argument(
        "--reuse-http-port",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="let several servers listen on the HTTP port (SO_REUSEPORT)",
    )
    serve.add_argument("--allow-http", type=_bool, default=True, metavar="BOOL", help="serve HTTP/REST at all")
    serve.add_argument("--allow-grpc", type=_bool, default=True, metavar="BOOL", help="serve gRPC at all")
    serve.add_argument(
        "--allow-metrics",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="serve /metrics at all (statistics are still collected)",
    )
    _add_grpc_arguments(serve)
    serve.add_argument(
        "--http-server",
        choices=HTTP_SERVERS,
        default="uvicorn",
        help="HTTP server under the app: uvicorn (fastest, HTTP/1.1) or hypercorn (adds h2c HTTP/2)",
    )
    serve.add_argument(
        "--strict-model-config",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="true disables auto-completion of model configs (deprecated Triton spelling)",
    )
    serve.add_argument(
        "--disable-auto-complete-config", action="store_true", help="the same as --strict-model-config=true"
    )
    serve.add_argument(
        "--model-config-name",
        type=_config_name,
        default=None,
        metavar="NAME",
        help="read each model's configs/NAME.pbtxt instead of its config.pbtxt, where it has one",
    )
    serve.add_argument(
        "--strict-readiness",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="true: /v2/health/ready is 200 only while every model is READY; false: only the server's state counts",
    )
    serve.add_argument(
        "--exit-on-error",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="exit at startup if any model fails to load (default false: the others serve)",
    )
    serve.add_argument(
        "--exit-timeout-secs",
        type=_non_negative_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long shutdown waits for in-flight requests; past it naiad stops without them and exits 1",
    )
    serve.add_argument(
        "--rate-limit",
        choices=("off", "execution_count"),
        default="off",
        help="execution_count: instances run only while the rate_limiter resources they declare are free",
    )
    serve.add_argument(
        "--backend-directory",
        type=Path,
        default=DEFAULT_BACKEND_DIRECTORY,
        metavar="DIR",
        help="where backends that are not installed plugins live, as <DIR>/<backend>/: Triton's python-based "
        "backends (<backend>/model.py) are served by the python backend",
    )
    serve.add_argument(
        "--rate-limit-resource",
        type=_resource,
        action="append",
        default=[],
        metavar="NAME:COUNT[:DEVICE]",
        help="total of a rate-limiter resource (with none given: the most any one instance asks for; once one is "
        "given, a resource it does not name has none)",
    )
    serve.add_argument(
        "--model-control-mode",
        choices=("none", "poll", "explicit"),
        default="none",
        help="none: load every model at startup; poll: also follow repository changes; explicit: load only "
        "--load-model ones, then use the load/unload API",
    )
    serve.add_argument(
        "--repository-poll-secs",
        type=_non_negative_seconds,
        default=15.0,
        metavar="SECONDS",
        help="with --model-control-mode=poll, seconds between polls of the repositories (0: no polling)",
    )
    serve.add_argument(
        "--model-load-thread-count",
        type=_positive,
        default=DEFAULT_LOAD_THREADS,
        metavar="N",
        help="models that load at the same time (at startup, on a poll)",
    )
    serve.add_argument(
        "--model-load-retry-count",
        type=_non_negative,
        default=0,
        metavar="N",
        help="how many times a version that failed to load is loaded again before it is left UNAVAILABLE",
    )
    serve.add_argument(
        "--model-unload-timeout-secs",
        type=_non_negative_seconds,
        default=DEFAULT_UNLOAD_TIMEOUT,
        metavar="SECONDS",
        help="how long an unload or reload waits for the old version's requests before it returns (they still finish)",
    )
    serve.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="with --model-control-mode=explicit, a model to load at startup (repeatable; * = all)",
    )
    serve.add_argument(
        "--cache-config",
        action="append",
        default=[],
        metavar="local,size=BYTES",
        help="keep a response cache of this many bytes for the models whose config enables response_cache",
    )
    serve.add_argument(
        "--response-cache-byte-size",
        type=_non_negative,
        default=None,
        metavar="BYTES",
        help="deprecated in Triton: --cache-config local,size=BYTES",
    )
    serve.add_argument(
        "--backend-config",
        type=_backend_setting,
        action="append",
        default=[],
        metavar="[BACKEND,]KEY=VALUE",
        help="a backend setting; without BACKEND it applies to every backend (e.g. default-max-batch-size=8)",
    )
    serve.add_argument(
        "--log-verbose",
        type=_non_negative,
        default=0,
        metavar="N",
        help="1 and up: debug messages too; 2 and up: the HTTP and gRPC libraries' as well",
    )
    serve.add_argument("--log-info", type=_bool, default=True, metavar="BOOL", help="log info messages")
    serve.add_argument("--log-warning", type=_bool, default=True, metavar="BOOL", help="log warnings")
    serve.add_argument("--log-error", type=_bool, default=True, metavar="BOOL", help="log errors")
    _add_observability_arguments(serve)
    _add_limit_arguments(serve)
    add_triton_arguments(serve, _bool)
    add_check_command(commands)
    return parser


# -- gRPC flags (naiad.grpc) ----------------------------------------------------------------------


def _add_grpc_arguments(serve: argparse.ArgumentParser) -> None:
    """Triton's ``--grpc-*`` flags; times are in milliseconds, as in Triton."""
    defaults = GrpcSettings()
    serve.add_argument(
        "--grpc-address", type=_address, default="0.0.0.0", metavar="ADDR", help="address the gRPC frontend listens on"
    )
    serve.add_argument(
        "--reuse-grpc-port",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="let several servers listen on the gRPC port (SO_REUSEPORT)",
    )
    for flag, default, metavar, meaning in (
        ("--grpc-keepalive-time", defaults.keepalive_time_ms, "MS", "period of the keepalive pings the server sends"),
        (
            "--grpc-keepalive-timeout",
            defaults.keepalive_timeout_ms,
            "MS",
            "how long the server waits for a keepalive ack before it closes the connection",
        ),
        (
            "--grpc-http2-max-pings-without-data",
            defaults.http2_max_pings_without_data,
            "N",
            "pings allowed without data frames (0: no limit)",
        ),
        (
            "--grpc-http2-min-recv-ping-interval-without-data",
            defaults.http2_min_recv_ping_interval_without_data_ms,
            "MS",
            "a client ping sooner than this after the last one, with no data, is a ping strike",
        ),
        (
            "--grpc-http2-max-ping-strikes",
            defaults.http2_max_ping_strikes,
            "N",
            "ping strikes tolerated before GOAWAY (0: any number)",
        ),
    ):
        serve.add_argument(flag, type=_non_negative, default=default, metavar=metavar, help=meaning)
    serve.add_argument(
        "--grpc-max-connection-age",
        type=_non_negative,
        default=None,
        metavar="MS",
        help="close connections older than this, gracefully (default: never)",
    )
    serve.add_argument(
        "--grpc-max-connection-age-grace",
        type=_non_negative,
        default=None,
        metavar="MS",
        help="time left to the calls of a connection past its age (default: no limit)",
    )
    serve.add_argument(
        "--grpc-keepalive-permit-without-calls",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="send keepalive pings on connections with no call in flight",
    )
    serve.add_argument(
        "--grpc-use-ssl", type=_bool, default=False, metavar="BOOL", help="serve gRPC over TLS (needs cert and key)"
    )
    serve.add_argument(
        "--grpc-use-ssl-mutual",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="serve gRPC over TLS and require client certificates signed by --grpc-root-cert",
    )
    serve.add_argument("--grpc-server-cert", default="", metavar="PEM", help="the server's certificate chain, for TLS")
    serve.add_argument("--grpc-server-key", default="", metavar="PEM", help="the server's private key, for TLS")
    serve.add_argument(
        "--grpc-root-cert", default="", metavar="PEM", help="root certificates that sign client certificates"
    )
    serve.add_argument(
        "--grpc-infer-response-compression-level",
        choices=tuple(COMPRESSION_LEVELS),
        default="none",
        help="compress infer responses (gzip or deflate, as the client accepts)",
    )


# -- metrics, statistics and log flags (naiad.metrics, naiad.logs) -------------------------------------


def _add_observability_arguments(serve: argparse.ArgumentParser) -> None:
    """Triton's ``--metrics-*``, ``--allow-*-metrics`` and ``--log-format/--log-file`` flags."""
    serve.add_argument(
        "--metrics-address",
        type=_address,
        default="",
        metavar="ADDR",
        help="address of the metrics listener (default: --http-address)",
    )
    serve.add_argument(
        "--metrics-interval-ms",
        type=_positive,
        default=2000,
        metavar="MS",
        help="how often the CPU, memory and GPU gauges are read",
    )
    serve.add_argument(
        "--metrics-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="repeatable; keys: counter_latencies, histogram_latencies, summary_latencies, summary_quantiles, "
        "response_latencies",
    )
    serve.add_argument(
        "--allow-cpu-metrics", type=_bool, default=True, metavar="BOOL", help="CPU and memory gauges in /metrics"
    )
    serve.add_argument(
        "--allow-gpu-metrics",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="GPU gauges in /metrics (through NVML, when the driver is there)",
    )
    serve.add_argument(
        "--collect-statistics",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="false stops per-request statistics (statistics extension, per-model metrics); to measure their cost",
    )
    serve.add_argument(
        "--log-format",
        type=_log_format,
        default="default",
        metavar="|".join(LOG_FORMATS),
        help="local timestamps, UTC ISO 8601 timestamps, or one JSON object per line",
    )
    serve.add_argument("--log-file", default="", metavar="PATH", help="log to this file instead of stderr")
    serve.add_argument(
        "--trace-config",
        action="append",
        default=[],
        metavar="[triton,]KEY=VALUE",
        help="repeatable; request traces in Triton's format: triton,file=PATH (where they are written), "
        "level=OFF|TIMESTAMPS|TENSORS, rate=N (every Nth request), count=N (-1: no end), "
        "log-frequency=N (traces per file; 0: one file at shutdown), mode=triton",
    )


def _trace_settings(entries: list[str]) -> TraceSettings:
    """The startup trace settings; ValueError when a ``--trace-config`` entry or the file is unusable."""
    settings = parse_trace_config(entries)
    problem = trace_path_writable(settings.file) if settings.file else None
    if problem is not None:
        raise ValueError(f"--trace-config file={settings.file}: traces cannot be written there: {problem}")
    return settings


def _positive(value: str) -> int:
    number = _whole_number(value)
    if number is None or number <= 0:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number > 0")
    return number


def _log_format(value: str) -> str:
    try:
        return canonical_format(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _metrics_options(args: argparse.Namespace) -> MetricsOptions:
    options = MetricsOptions(
        allow_metrics=args.allow_metrics,
        allow_cpu_metrics=args.allow_cpu_metrics,
        allow_gpu_metrics=args.allow_gpu_metrics,
        address=args.metrics_address,
        interval_ms=args.metrics_interval_ms,
    )
    return apply_metrics_config(options, args.metrics_config)


# -- end metrics, statistics and log flags -----------------------------------------------------------


def _non_negative(value: str) -> int:
    number = _whole_number(value)
    if number is None or number < 0:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number >= 0")
    return number


def _grpc_settings(args: argparse.Namespace) -> GrpcSettings:
    return GrpcSettings(
        keepalive_time_ms=args.grpc_keepalive_time,
        keepalive_timeout_ms=args.grpc_keepalive_timeout,
        keepalive_permit_without_calls=args.grpc_keepalive_permit_without_calls,
        http2_max_pings_without_data=args.grpc_http2_max_pings_without_data,
        http2_min_recv_ping_interval_without_data_ms=args.grpc_http2_min_recv_ping_interval_without_data,
        http2_max_ping_strikes=args.grpc_http2_max_ping_strikes,
        max_connection_age_ms=args.grpc_max_connection_age,
        max_connection_age_grace_ms=args.grpc_max_connection_age_grace,
        infer_response_compression_level=args.grpc_infer_response_compression_level,
        reuse_port=args.reuse_grpc_port,
        tls=tls_from_flags(
            args.grpc_use_ssl,
            args.grpc_use_ssl_mutual,
            args.grpc_server_cert,
            args.grpc_server_key,
            args.grpc_root_cert,
        ),
    )


# -- end gRPC flags --------------------------------------------------------------------------------


# -- limits and restrictions (naiad.limits, naiad.restrictions) -------------------------------------


def _add_limit_arguments(serve: argparse.ArgumentParser) -> None:
    """Sizes, timeouts, connection counts and restricted APIs (see docs/security.md)."""
    http, grpc = HttpLimits(), GrpcLimits()
    serve.add_argument(
        "--http-max-input-size",
        type=_positive,
        default=http.max_input_size,
        metavar="BYTES",
        help="largest HTTP request body, compressed or not, and largest tensor in one (Triton's flag)",
    )
    serve.add_argument(
        "--http-max-header-size",
        type=_positive,
        default=http.max_header_size,
        metavar="BYTES",
        help="largest request head (request line and headers); larger ones get 431",
    )
    serve.add_argument(
        "--http-max-headers",
        type=_positive,
        default=http.max_headers,
        metavar="N",
        help="most headers in one request; more get 431",
    )
    serve.add_argument(
        "--http-header-timeout",
        type=_positive_seconds,
        default=http.header_timeout_s,
        metavar="SECONDS",
        help="longest a client may take to send a request's headers",
    )
    serve.add_argument(
        "--http-body-timeout",
        type=_positive_seconds,
        default=http.body_timeout_s,
        metavar="SECONDS",
        help="longest pause while a request body arrives",
    )
    serve.add_argument(
        "--http-idle-timeout",
        type=_positive_seconds,
        default=http.idle_timeout_s,
        metavar="SECONDS",
        help="how long a keep-alive connection may sit between requests",
    )
    serve.add_argument(
        "--http-max-connections",
        type=_positive,
        default=http.max_connections,
        metavar="N",
        help="open connections per HTTP listener (and the metrics listener); more are refused with 503",
    )
    serve.add_argument(
        "--grpc-max-message-size",
        type=_message_size,
        default=grpc.max_message_size,
        metavar="BYTES",
        help=f"largest gRPC message received or sent, compressed or not (at most {MAX_GRPC_MESSAGE_SIZE})",
    )
    serve.add_argument(
        "--grpc-stream-backlog",
        type=_positive,
        default=grpc.stream_backlog,
        metavar="N",
        help="ModelStreamInfer requests in progress or with unread responses before the server stops reading a stream",
    )
    serve.add_argument(
        "--grpc-idle-timeout",
        type=_positive_seconds,
        default=grpc.idle_timeout_s,
        metavar="SECONDS",
        help="a gRPC connection without calls for this long is closed (clients reconnect on their next call)",
    )
    serve.add_argument(
        "--grpc-handshake-timeout",
        type=_positive_seconds,
        default=grpc.handshake_timeout_s,
        metavar="SECONDS",
        help="a gRPC connection that has not finished its HTTP/2 handshake by then is closed",
    )
    serve.add_argument(
        "--grpc-max-connections",
        type=_positive,
        default=grpc.max_connections,
        metavar="N",
        help="open gRPC connections; more are closed at once",
    )
    serve.add_argument(
        "--http-restricted-api",
        action="append",
        default=[],
        metavar="APIS:KEY=VALUE",
        help="calls to these API groups need header KEY: VALUE (Triton's flag; repeatable)",
    )
    serve.add_argument(
        "--grpc-restricted-protocol",
        action="append",
        default=[],
        metavar="PROTOCOLS:KEY=VALUE",
        help="calls to these protocol groups need metadata triton-grpc-protocol-KEY: VALUE (Triton's flag)",
    )
    serve.add_argument(
        "--max-instances-per-model",
        type=_positive,
        default=DEFAULT_MAX_INSTANCES_PER_MODEL,
        metavar="N",
        help="instances one model version may ask for; a config asking for more fails to load",
    )


def _message_size(value: str) -> int:
    size = _positive(value)
    if size > MAX_GRPC_MESSAGE_SIZE:
        raise argparse.ArgumentTypeError(f"gRPC messages can be at most {MAX_GRPC_MESSAGE_SIZE} bytes, got {size}")
    return size


def _non_negative_seconds(value: str) -> float:
    seconds = _number(value)
    if seconds is None or not seconds >= 0:
        raise argparse.ArgumentTypeError(f"'{value}' is not a number of seconds >= 0")
    return seconds


def _positive_seconds(value: str) -> float:
    seconds = _number(value)
    if seconds is None or not seconds > 0:
        raise argparse.ArgumentTypeError(f"'{value}' is not a number of seconds > 0")
    return seconds


def _number(value: str) -> float | None:
    """``value`` as a float, or None when it is not a number."""
    try:
        return float(value)
    except ValueError:
        return None


def _limits(args: argparse.Namespace) -> tuple[HttpLimits, GrpcLimits]:
    http = HttpLimits(
        max_input_size=args.http_max_input_size,
        max_header_size=args.http_max_header_size,
        max_headers=args.http_max_headers,
        header_timeout_s=args.http_header_timeout,
        body_timeout_s=args.http_body_timeout,
        idle_timeout_s=args.http_idle_timeout,
        max_connections=args.http_max_connections,
    )
    grpc = GrpcLimits(
        max_message_size=args.grpc_max_message_size,
        stream_backlog=args.grpc_stream_backlog,
        idle_timeout_s=args.grpc_idle_timeout,
        handshake_timeout_s=args.grpc_handshake_timeout,
        max_connections=args.grpc_max_connections,
    )
    return http, grpc


def options_from_args(args: argparse.Namespace) -> ServerOptions:
    backend_config: dict[str, dict[str, str]] = {}
    for backend, key, value in args.backend_config:
        backend_config.setdefault(backend, {})[key] = value
    http_limits, grpc_limits = _limits(args)
    return ServerOptions(
        model_repositories=tuple(path.resolve() for path in args.model_repository),
        http_address=args.http_address,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        grpc_address=args.grpc_address,
        allow_grpc=args.allow_grpc,
        grpc=_grpc_settings(args),
        metrics_port=args.metrics_port,
        metrics=_metrics_options(args),
        collect_statistics=args.collect_statistics,
        allow_http=args.allow_http,
        http_server=args.http_server,
        auto_complete=not (args.strict_model_config or args.disable_auto_complete_config),
        strict_readiness=args.strict_readiness,
        exit_on_error=args.exit_on_error,
        exit_timeout_secs=args.exit_timeout_secs,
        model_control_mode=args.model_control_mode,
        load_models=tuple(args.load_model),
        repository_poll_secs=args.repository_poll_secs,
        model_load_thread_count=args.model_load_thread_count,
        model_unload_timeout_secs=args.model_unload_timeout_secs,
        rate_limit=args.rate_limit,
        rate_limit_resources=dict(args.rate_limit_resource),
        backend_config=backend_config,
        backend_directory=args.backend_directory,
        http_limits=http_limits,
        grpc_limits=grpc_limits,
        http_restrictions=parse_restrictions(args.http_restricted_api, "api"),
        grpc_restrictions=parse_restrictions(args.grpc_restricted_protocol, "protocol", GRPC_KEY_PREFIX),
        max_instances_per_model=args.max_instances_per_model,
        trace=_trace_settings(deprecated_trace_entries(args) + args.trace_config),
        cache=parse_cache_config(args.cache_config, args.response_cache_byte_size),
        server_id=args.id,
        model_config_name=args.model_config_name or "",
        model_load_retry_count=args.model_load_retry_count,
        reuse_http_port=args.reuse_http_port,
        http_headers=args.http_header_forward_pattern,
        grpc_headers=args.grpc_header_forward_pattern,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "check":
        return run_check(args)
    try:
        logs = configure_logging(
            args.log_verbose,
            info=args.log_info,
            warning=args.log_warning,
            error=args.log_error,
            log_format=args.log_format,
            log_file=args.log_file,
        )
    except OSError as error:
        parser.error(f"cannot open --log-file '{args.log_file}': {error.strerror}")
    refused = refusal(args)
    if refused is not None:
        parser.error(refused)
    try:
        options = options_from_args(args)
    except ValueError as error:
        parser.error(str(error))
    for warning in deprecated_trace_warnings(args):
        logger.warning("%s", warning)
    for note in no_effect_notes(args):
        logger.info("%s", note)
    if args.response_cache_byte_size is not None:
        logger.warning(
            "--response-cache-byte-size is deprecated; use --cache-config local,size=%d instead",
            args.response_cache_byte_size,
        )
    for repository in options.model_repositories:
        if not repository.is_dir():
            logger.error(
                "model repository '%s' does not exist or is not a folder; check --model-repository",
                repository,
            )
            return 2
    return_large_blocks_to_os()
    raise_open_file_limit()
    try:
        server = Server(options, logs=logs)
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(server.run(when_ready=settle_heap, exit_watchdog=True))  # it serves from now on
    except (StartupError, OSError) as error:
        logger.error("naiad cannot start: %s", error)
        return 1
    return 1 if server.exit_timed_out else 0


if __name__ == "__main__":
    sys.exit(main())
