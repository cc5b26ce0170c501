"""The HTTP/REST frontend."""

from naiad.http.app import build_app

__all__ = ["build_app"]
