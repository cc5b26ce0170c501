"""Model warmup: the config's ``model_warmup`` samples run on every instance before a version is READY.

As in Triton: each instance runs every sample in config order, ``count`` times (0: once); a sample
without a ``batch_size`` is skipped; a batching model gets ``batch_size`` requests of one row each
in one execution, a non-batching model one request. Inputs are zeros, random bytes (BYTES inputs:
empty strings, for both) or a file under ``<model>/warmup/``. Warmup requests look like any other
request to the model (no id, no parameters) and are counted in the version's statistics. A sample
that cannot be built or whose response is an error fails the load with Triton's reason.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from naiad import datatypes
from naiad.errors import ErrorCode, NaiadError, invalid_arg, request_prefix
from naiad.inference import Deliver, InferenceRequest, RequestedOutput, ResponseEvent, ResponseSender
from naiad.models import ModelSignature
from naiad.pipeline import build_pipeline
from naiad.protocol.model_config_pb2 import ModelConfig, ModelWarmup
from naiad.scheduling.execution import InstanceRunner
from naiad.statistics import ModelStatistics
from naiad.tensor import Tensor
from naiad.validation import validate_inputs

logger = logging.getLogger(__name__)

_NO_ID = request_prefix("")


def warm_up(
    config: ModelConfig,
    model_dir: Path,
    version: int,
    signature: ModelSignature,
    runners: Sequence[InstanceRunner],
    statistics: ModelStatistics | None,
) -> None:
    """Run every warmup sample on every instance; raise :class:`NaiadError` with Triton's reason on failure."""
    samples = [sample for sample in config.model_warmup if sample.batch_size > 0]
    if not samples or not runners:
        return
    batching = config.max_batch_size > 0
    # Each sample's inputs are read and checked once, then sent to every instance.
    prepared = [(sample, _row_inputs(config, model_dir, signature, sample, runners[0])) for sample in samples]
    deliver = build_pipeline([statistics.stage()] if statistics is not None else [], batching=batching)
    outputs = {name: RequestedOutput(name) for name in signature.outputs}
    for runner in runners:
        for sample, inputs in prepared:
            rows = sample.batch_size if batching else 1
            for iteration in range(1, max(sample.count, 1) + 1):
                logger.debug(  # Triton's words
                    "model '%s' instance %s is running warmup sample '%s' for iteration %d",
                    config.name,
                    runner.name,
                    sample.name,
                    iteration,
                    extra={"model": config.name, "version": version},
                )
                batch = _Batch(config.name, version, inputs, rows, outputs, deliver)
                if statistics is not None:
                    for request in batch.requests:
                        statistics.track(request)
                runner.execute(batch.requests)
                errors = batch.errors()
                if errors:
                    detail = "".join(f"{message}; " for message in errors)
                    raise invalid_arg(f"failed to run warmup sample '{sample.name}': {detail}")


def _row_inputs(
    config: ModelConfig, model_dir: Path, signature: ModelSignature, sample: ModelWarmup, runner: InstanceRunner
) -> dict[str, Tensor]:
    """One warmup request's inputs (one row of a batching model), checked as a client's would be."""
    inputs = sample_inputs(config, model_dir, sample)
    _check_batch_size(config, sample, runner)
    if config.max_batch_size > 0:
        inputs = [Tensor(t.name, t.datatype, t.data.reshape((1, *t.data.shape))) for t in inputs]
    validate_inputs(config.name, signature, inputs, "")
    return signature.model_shaped({tensor.name: tensor for tensor in inputs})


def sample_inputs(config: ModelConfig, model_dir: Path, sample: ModelWarmup) -> list[Tensor]:
    """One request's inputs of ``sample`` (without a batch dimension); inputs the config lacks are left out."""
    known = {tensor.name for tensor in config.input}
    tensors: list[Tensor] = []
    for name, spec in sample.inputs.items():
        if name not in known:
            continue
        if any(dim < 0 for dim in spec.dims):
            raise invalid_arg(f"warmup setting expects all variable-size dimensions are specified for input '{name}'")
        datatype = datatypes.BY_NUMBER.get(spec.data_type)
        if datatype is None:
            raise invalid_arg(f"{_NO_ID}warmup setting expects input '{name}' to have data_type set")
        shape = tuple(spec.dims)
        source = spec.WhichOneof("input_data_type")
        if source is None:
            raise invalid_arg(f"{_NO_ID}warmup setting expects input '{name}' to have input_data_type set")
        if source == "input_data_file":
            data = _from_file(model_dir / "warmup" / spec.input_data_file, spec.input_data_file, datatype, shape)
        else:
            data = _generated(datatype, shape, random=source == "random_data")
        tensors.append(Tensor(name, datatype.wire, data))
    return tensors


def _check_batch_size(config: ModelConfig, sample: ModelWarmup, runner: InstanceRunner) -> None:
    if config.max_batch_size == 0:
        if sample.batch_size != 1:
            raise invalid_arg(
                f"warmup sample '{sample.name}' has batch_size {sample.batch_size}, but model '{config.name}' "
                "does not batch (max_batch_size 0); give it batch_size: 1"
            )
    elif sample.batch_size > config.max_batch_size:
        raise invalid_arg(
            f"failed to run warmup sample '{sample.name}': batch size {sample.batch_size} for '{runner.name}', "
            f"max allowed is {config.max_batch_size}; "
        )


def _generated(datatype: datatypes.DataType, shape: tuple[int, ...], *, random: bool) -> npt.NDArray[np.generic]:
    if not random or datatype.wire == "BYTES":  # Triton sends empty strings for random BYTES data too
        return datatypes.zeros(datatype, shape)
    raw = np.random.default_rng().bytes(datatypes.element_count(shape) * datatype.byte_size)
    values = np.frombuffer(raw, dtype=datatype.numpy).reshape(shape).copy()
    if datatype.wire == "BOOL":
        values = values.view(np.uint8).astype(np.bool_)  # any byte but 0 is true
    return values


def _from_file(
    path: Path, file_name: str, datatype: datatypes.DataType, shape: tuple[int, ...]
) -> npt.NDArray[np.generic]:
    try:
        content = path.read_bytes()
    except OSError as error:
        raise NaiadError(f"failed to open text file for read {path}: {error.strerror}", ErrorCode.INTERNAL) from None
    data = datatypes.from_raw(content, datatype, shape)
    if data is None:
        needed = datatypes.element_count(shape) * datatype.byte_size
        raise invalid_arg(
            f"{_NO_ID}warmup setting expects {needed} bytes, but the data provided from {file_name} only has "
            f"{len(content)} bytes"
        )
    return data


class _Batch:
    """One execution's warmup requests (``rows`` of them, all with ``inputs``) and the answers they get."""

    def __init__(
        self,
        model: str,
        version: int,
        inputs: dict[str, Tensor],
        rows: int,
        outputs: dict[str, RequestedOutput],
        deliver: Deliver,
    ) -> None:
        self._done = threading.Semaphore(0)
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self.requests = [
            InferenceRequest(
                model_name=model,
                model_version=version,
                inputs=dict(inputs),
                requested_outputs=dict(outputs),
                sender=ResponseSender(self._received, deliver),
                batch_size=1,
            )
            for _ in range(rows)
        ]

    def _received(self, event: ResponseEvent) -> None:
        response = event.response
        if response is not None and response.error is not None:
            with self._lock:
                self._errors.append(response.error.message)
        if event.final:
            self._done.release()

    def errors(self) -> list[str]:
        """The error messages of the batch's responses, once every request has had its final response."""
        for _ in self.requests:
            self._done.acquire()
        return self._errors
