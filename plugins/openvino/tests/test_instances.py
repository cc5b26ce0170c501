"""Instances through the real hooks: config reshape, static batches, independence, finalize."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from naiad.backend import ModelInstanceGroup, NaiadError
from naiad.testing import ModelRepositoryBuilder
from naiad_openvino.instance import OpenVinoInstance
from naiad_openvino.model import OpenVinoModel

from . import models
from .conftest import LoadModel, Sources, batch_of, infer, place


@pytest.fixture
def repository(tmp_path: Path) -> ModelRepositoryBuilder:
    return ModelRepositoryBuilder(tmp_path / "models")


def test_config_reshape_is_applied_both_ways(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = """
    backend: "openvino"
    max_batch_size: 4
    input [
      { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } },
      { name: "INPUT1" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } }
    ]
    output [ { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
    """
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    flat = batch_of(3)
    inputs = {name: array.reshape(3, 2, 2) for name, array in flat.items()}
    output = infer(model, inputs)["OUTPUT1"]
    assert output.shape == (3, 2, 2)
    np.testing.assert_allclose(output.reshape(3, 4), models.reference(sources.add_mul_xml, flat)["OUTPUT1"])


def test_static_batch_without_padding_rejects_smaller_batches(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = """
    backend: "openvino"
    max_batch_size: 4
    parameters { key: "SKIP_OV_DYNAMIC_BATCHSIZE" value: { string_value: "YES" } }
    """
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    instance = model.instances[0]
    assert isinstance(instance, OpenVinoInstance)
    assert str(instance.compiled.inputs[0].get_partial_shape()) == "[4,4]"
    assert infer(model, batch_of(4))["OUTPUT0"].shape == (4, 4)
    with pytest.raises(NaiadError, match=r"expected requests with batch size '4', got '1'"):
        infer(model, batch_of(1))


def test_dynamic_batch_is_the_default(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = 'backend: "openvino"\nmax_batch_size: 4'
    model = load_model(place(repository, "m", config, sources.static_xml))
    instance = model.instances[0]
    assert isinstance(instance, OpenVinoInstance)
    assert str(instance.compiled.inputs[0].get_partial_shape()) == "[?,4]"


def test_two_instances_run_concurrently_and_independently(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = 'backend: "openvino"\ninstance_group [ { count: 2 kind: KIND_CPU } ]'
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    assert len(model.instances) == 2
    first, second = model.instances
    assert isinstance(first, OpenVinoInstance)
    assert isinstance(second, OpenVinoInstance)
    assert first.compiled is not second.compiled
    assert first.request is not second.request
    failures: list[BaseException] = []

    def hammer(instance: int) -> None:
        try:
            for seed in range(20):
                inputs = batch_of(1 + seed % 4, seed=seed + 100 * instance)
                np.testing.assert_allclose(
                    infer(model, inputs, instance=instance)["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"], rtol=1e-6
                )
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=hammer, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_finalize_releases_the_engine(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    model = load_model(place(repository, "m", None, sources.add_mul_xml))
    backend_model = model.backend_model
    instance = model.instances[0]
    assert isinstance(backend_model, OpenVinoModel)
    assert isinstance(instance, OpenVinoInstance)
    model.close()
    assert instance.compiled is None
    assert instance.request is None
    assert backend_model.core is None
    assert backend_model.ov_model is None


def test_without_instance_groups_the_model_runs_on_cpu(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    """Triton's openvino backend prefers KIND_CPU: KIND_AUTO must not pick an NVIDIA GPU.

    ``naiad_backend_info`` declares it; naiad adds the group (here on a host with one GPU).
    """
    model = load_model(place(repository, "m", None, sources.add_mul_xml), gpu_count=1)
    assert [(group.name, group.kind, group.count) for group in model.config.instance_group] == [
        ("m", ModelInstanceGroup.KIND_CPU, 1)
    ]
