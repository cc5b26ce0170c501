"""A loaded (or failed) model version and the facts about it the request path needs."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from naiad import datatypes
from naiad.backend import BackendModel, ModelInstance
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling import Scheduler
from naiad.statistics import ModelStatistics


class ModelState(enum.Enum):
    """Triton's model version states, as the repository index reports them."""

    LOADING = "LOADING"
    READY = "READY"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One config input, pre-digested for request validation."""

    name: str
    datatype: datatypes.DataType
    dims: tuple[int, ...]
    optional: bool
    is_shape_tensor: bool
    allow_ragged_batch: bool


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One config output."""

    name: str
    datatype: datatypes.DataType
    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ModelSignature:
    """The parts of a config the data plane consults on every request."""

    max_batch_size: int
    inputs: dict[str, InputSpec]
    outputs: dict[str, OutputSpec]
    decoupled: bool

    @classmethod
    def from_config(cls, config: ModelConfig) -> ModelSignature:
        return cls(
            max_batch_size=config.max_batch_size,
            inputs={
                tensor.name: InputSpec(
                    tensor.name,
                    datatypes.BY_NUMBER[tensor.data_type],
                    tuple(tensor.dims),
                    tensor.optional,
                    tensor.is_shape_tensor,
                    tensor.allow_ragged_batch,
                )
                for tensor in config.input
            },
            outputs={
                tensor.name: OutputSpec(tensor.name, datatypes.BY_NUMBER[tensor.data_type], tuple(tensor.dims))
                for tensor in config.output
            },
            decoupled=config.model_transaction_policy.decoupled,
        )


@dataclass(eq=False)
class ModelVersion:
    """One version of one model: its state and, once READY, everything needed to serve it."""

    name: str
    version: int
    state: ModelState = ModelState.LOADING
    reason: str = ""
    config: ModelConfig | None = None
    config_json: str = ""
    signature: ModelSignature | None = None
    backend_model: BackendModel | None = None
    instances: list[tuple[str, ModelInstance]] = field(default_factory=list)
    scheduler: Scheduler | None = None
    statistics: ModelStatistics | None = None  # None when --collect-statistics=false

    @property
    def ready(self) -> bool:
        return self.state is ModelState.READY

    def metadata(self) -> dict[str, Any]:
        """The KServe model-metadata body for this version (``versions`` filled by the caller)."""
        assert self.config is not None
        assert self.signature is not None
        batch = [-1] if self.signature.max_batch_size > 0 else []
        return {
            "name": self.name,
            "versions": [str(self.version)],
            "platform": self.config.platform or self.config.backend,
            "inputs": [
                {"name": spec.name, "datatype": spec.datatype.wire, "shape": batch + list(spec.dims)}
                for spec in self.signature.inputs.values()
            ],
            "outputs": [
                {"name": spec.name, "datatype": spec.datatype.wire, "shape": batch + list(spec.dims)}
                for spec in self.signature.outputs.values()
            ],
        }
