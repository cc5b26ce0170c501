"""Model versions: the immutable serving record of a READY version, and every version's status."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from naiad import datatypes
from naiad.backend_model import BackendModel
from naiad.errors import ErrorCode, NaiadError
from naiad.inference import Deliver, InferenceRequest, RequestedOutput
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.reshapes import Reshape, model_shaped
from naiad.response_cache import ModelCache
from naiad.scheduling.base import Scheduler
from naiad.scheduling.execution import InstanceRunner
from naiad.statistics import ModelStatistics
from naiad.tensor import Tensor


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
    required_inputs: tuple[str, ...]  # the inputs that are not optional, in config order
    reshapes: dict[str, Reshape]  # input -> (dims, reshape), for the inputs with a config reshape

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
            required_inputs=tuple(tensor.name for tensor in config.input if not tensor.optional),
            reshapes={
                tensor.name: (tuple(tensor.dims), tuple(tensor.reshape.shape))
                for tensor in config.input
                if tensor.HasField("reshape")
            },
        )

    def model_shaped(self, inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``inputs`` as the backend gets them: each with a config reshape in its reshape form."""
        return model_shaped(inputs, self.reshapes, self.max_batch_size > 0)


@dataclass(frozen=True, slots=True, eq=False)
class ServingModel:
    """One READY model version: everything the request path needs, fixed for the version's lifetime.

    ``pipeline`` is the version's response pipeline (:mod:`naiad.pipeline`); ``default_outputs``
    what a request that names no outputs asks for (every output of the config); ``cache`` its use of
    the server's response cache (None: its responses are not cached).
    """

    name: str
    version: int
    backend: str
    config: ModelConfig
    config_json: str
    signature: ModelSignature
    backend_model: BackendModel
    instances: tuple[InstanceRunner, ...]
    scheduler: Scheduler
    statistics: ModelStatistics | None
    pipeline: Deliver
    default_outputs: Mapping[str, RequestedOutput]
    cache: ModelCache | None = None
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # classification labels by output

    @property
    def decoupled(self) -> bool:
        return self.signature.decoupled

    def admit(self, request: InferenceRequest) -> None:
        """Hand a validated request to the scheduler, counted in the statistics if they are kept."""
        statistics = self.statistics
        if statistics is None:
            self.scheduler.submit(request)
            return
        tracker = statistics.track(request)
        try:
            self.scheduler.submit(request)
        except Exception as error:
            if isinstance(error, NaiadError) and error.code is ErrorCode.INVALID_ARG:
                statistics.forget(tracker)  # an invalid request (a sequence's checks): not counted, as in Triton
            else:
                statistics.refused(tracker, error if isinstance(error, NaiadError) else NaiadError(str(error)))
            raise

    def metadata(self) -> dict[str, Any]:
        """The KServe model-metadata body for this version (``versions`` filled by the caller)."""
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


@dataclass(eq=False)
class VersionStatus:
    """One version of one model as the repository index shows it: its state and why.

    ``serving`` is set exactly while the version is READY.
    """

    name: str
    version: int
    state: ModelState = ModelState.LOADING
    reason: str = ""
    serving: ServingModel | None = None
    failure: NaiadError | None = None  # what left it UNAVAILABLE

    @property
    def ready(self) -> bool:
        return self.state is ModelState.READY
