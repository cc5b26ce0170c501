"""The repository agents naiad runs when a model loads: Triton's ``checksum`` agent.

A config names it in ``model_repository_agents``; each parameter ``MD5:<file>`` gives the MD5 hash
(lower-case hex) a file inside the model's folder must have::

    model_repository_agents {
      agents [ { name: "checksum", parameters { key: "MD5:1/model.onnx" value: "<md5sum of 1/model.onnx>" } } ]
    }

A file whose hash differs keeps the model from loading, with the agent's words (``Mismatched MD5 hash for
file 1/model.onnx, expect: ..., got: ...``). Any other agent is refused at validation
(:mod:`naiad.config.validate`): a model must not load with files an agent was meant to check or change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from naiad.config.paths import confined_path
from naiad.errors import NaiadError, invalid_arg, unsupported
from naiad.protocol.model_config_pb2 import ModelConfig

AGENTS = frozenset({"checksum"})


def run_load_agents(config: ModelConfig, model_dir: Path, model_name: str) -> None:
    """Run the config's agents on a model about to load; raises the first agent's error."""
    for agent in config.model_repository_agents.agents:
        if agent.name == "checksum":
            _check_hashes(agent.parameters, model_dir, model_name)


def _check_hashes(parameters: Mapping[str, str], model_dir: Path, model_name: str) -> None:
    for key, expected in parameters.items():
        algorithm, separator, relative = key.partition(":")
        if not separator:
            raise _for(model_name, invalid_arg(f"failed to parse key: {key}"))
        if algorithm.lower() != "md5":
            raise _for(model_name, unsupported(f"Unsupported checksum algorithm: {algorithm}"))
        path = confined_path(model_dir, relative, f"checksum file '{key}'", model=model_name, from_request=False)
        try:
            data = path.read_bytes()
        except OSError as error:
            message = f"failed to open text file for read {relative}: {error.strerror}"
            raise _for(model_name, invalid_arg(message)) from None
        found = hashlib.md5(data, usedforsecurity=False).hexdigest()
        if found != expected:
            raise _for(
                model_name, invalid_arg(f"Mismatched MD5 hash for file {relative}, expect: {expected}, got: {found}")
            )


def _for(model_name: str, error: NaiadError) -> NaiadError:
    """The agent's error, naming the model as Triton's poll log does (``'<model>': <message>``)."""
    return NaiadError(f"model '{model_name}': {error.message} (checksum repository agent)", error.code)
