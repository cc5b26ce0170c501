"""TLS for the gRPC frontend, from Triton's ``--grpc-use-ssl`` flags.

``--grpc-use-ssl=true`` serves gRPC over TLS with ``--grpc-server-cert`` and ``--grpc-server-key``
(PEM files); ``--grpc-use-ssl-mutual=true`` also asks every client for a certificate signed by
``--grpc-root-cert``. The files are read once, at startup; one that cannot be read stops the start
with its path and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc  # type: ignore[import-untyped,unused-ignore]


@dataclass(frozen=True, slots=True)
class GrpcTls:
    """The PEM files of the server's certificate, its key, and (mutual TLS) the clients' root."""

    server_cert: Path
    server_key: Path
    root_cert: Path | None = None
    mutual: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        """The server credentials; OSError naming the flag and file that could not be read."""
        key = _read("--grpc-server-key", self.server_key)
        cert = _read("--grpc-server-cert", self.server_cert)
        root = _read("--grpc-root-cert", self.root_cert) if self.root_cert is not None else None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=root, require_client_auth=self.mutual)


def tls_from_flags(use_ssl: bool, mutual: bool, server_cert: str, server_key: str, root_cert: str) -> GrpcTls | None:
    """The TLS settings the flags ask for, or None for plaintext; ValueError when one is missing."""
    if not (use_ssl or mutual):
        return None
    missing = [
        flag for flag, value in (("--grpc-server-cert", server_cert), ("--grpc-server-key", server_key)) if not value
    ]
    if mutual and not root_cert:
        missing.append("--grpc-root-cert")
    if missing:
        wanted = "--grpc-use-ssl-mutual=true" if mutual else "--grpc-use-ssl=true"
        raise ValueError(f"{wanted} needs {' and '.join(missing)} (PEM files)")
    return GrpcTls(Path(server_cert), Path(server_key), Path(root_cert) if root_cert else None, mutual)


def _read(flag: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise OSError(f"cannot read {flag} '{path}': {error.strerror}") from None
