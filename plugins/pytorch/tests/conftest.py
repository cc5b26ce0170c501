"""Drive the pytorch backend through naiad's real load pipeline, without a server.

``load(name)`` loads ``<model_repository>/<name>`` with :func:`naiad.testing.load_model`;
``model.infer(...)`` runs one request as a batch of its own on a chosen instance
(:meth:`~naiad.testing.LoadedModel.request` + :meth:`~naiad.testing.LoadedModel.execute`) and
returns the outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy.typing as npt
import pytest

from naiad.backend import InferenceResponse, ModelConfig, ModelInstance, NaiadError, Tensor, datatypes
from naiad.testing import LoadedModel, ModelRepositoryBuilder, load_model


class Model:
    """A loaded model whose requests carry the config's datatypes (BF16 as ``uint16`` bit patterns)."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded

    @property
    def config(self) -> ModelConfig:
        return self.loaded.config

    @property
    def instances(self) -> list[ModelInstance]:
        return self.loaded.instances

    def infer(self, inputs: Mapping[str, npt.NDArray[Any]], *, instance: int = 0) -> dict[str, npt.NDArray[Any]]:
        """Run one request asking for every config output; raises the response's error."""
        response = self.respond(inputs, instance=instance)
        if response.error is not None:
            raise response.error
        return {tensor.name: tensor.numpy() for tensor in response.outputs}

    def respond(self, inputs: Mapping[str, npt.NDArray[Any]], *, instance: int = 0) -> InferenceResponse:
        """The single response of one request executed on ``instance``."""
        batching = self.config.max_batch_size > 0
        request, collector = self.loaded.request(
            {name: self._tensor(name, array) for name, array in inputs.items()},
            batch_size=next(iter(inputs.values())).shape[0] if batching else 1,
        )
        self.loaded.execute([request], instance=instance)
        return collector.only()

    def _tensor(self, name: str, array: npt.NDArray[Any]) -> Tensor:
        spec = next((tensor for tensor in self.config.input if tensor.name == name), None)
        datatype = datatypes.BY_NUMBER[spec.data_type] if spec is not None else datatypes.from_numpy(array.dtype)
        data = datatypes.to_bytes_array(array) if datatype.wire == "BYTES" else array
        return Tensor(name, datatype.wire, data)


LoadModel = Callable[..., Model]


@pytest.fixture
def load(model_repository: ModelRepositoryBuilder) -> Iterator[LoadModel]:
    """``load(name, auto_complete=False, gpu_count=0)``: load ``<model_repository>/<name>``."""
    loaded: list[LoadedModel] = []

    def load_pytorch_model(name: str, *, auto_complete: bool = False, gpu_count: int = 0) -> Model:
        model = load_model(model_repository.root / name, auto_complete=auto_complete, gpu_count=gpu_count)
        loaded.append(model)
        return Model(model)

    yield load_pytorch_model
    for model in loaded:
        model.close()


def load_error(load: LoadModel, name: str, *, auto_complete: bool = False) -> str:
    """The message of the error loading ``name`` raises."""
    with pytest.raises(NaiadError) as caught:
        load(name, auto_complete=auto_complete)
    return caught.value.message
