"""Auto-complete through the real hooks: what the backend writes into the config, and that the
completed model serves what OpenVINO computes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from naiad.backend import DataType, ModelConfig
from naiad.testing import ModelRepositoryBuilder

from . import models
from .conftest import LoadModel, Sources, batch_of, infer, place


@pytest.fixture
def repository(tmp_path: Path) -> ModelRepositoryBuilder:
    return ModelRepositoryBuilder(tmp_path / "models")


def _io(config: ModelConfig) -> list[tuple[str, str, list[int]]]:
    return [(t.name, DataType.Name(t.data_type), list(t.dims)) for t in [*config.input, *config.output]]


ADD_MUL_IO = [
    ("INPUT0", "TYPE_FP32", [4]),
    ("INPUT1", "TYPE_FP32", [4]),
    ("OUTPUT0", "TYPE_FP32", [4]),
    ("OUTPUT1", "TYPE_FP32", [4]),
]


@pytest.mark.parametrize("kind", ["ir", "onnx"])
def test_without_config_a_dynamic_first_dimension_means_batching(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources, kind: str
) -> None:
    if kind == "ir":
        model_dir = place(repository, "m", None, sources.add_mul_xml)
    else:
        model_dir = place(
            repository, "m", 'backend: "openvino"\ndefault_model_filename: "model.onnx"', sources.add_mul_onnx
        )
    model = load_model(model_dir)
    config = model.config
    assert config.backend == "openvino"
    assert config.platform == ""
    assert config.max_batch_size == 4
    assert config.HasField("dynamic_batching")
    assert _io(config) == ADD_MUL_IO
    inputs = batch_of(4)
    reference = models.reference(sources.add_mul_xml, inputs)
    for name, array in infer(model, inputs).items():
        np.testing.assert_allclose(array, reference[name], rtol=1e-6)


@pytest.mark.parametrize(("default", "dynamic"), [("16", True), ("1", False)])
def test_default_max_batch_size_comes_from_the_backend_config(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources, default: str, dynamic: bool
) -> None:
    model = load_model(
        place(repository, "m", None, sources.add_mul_xml),
        backend_config={"openvino": {"default-max-batch-size": default}},
    )
    assert model.config.max_batch_size == int(default)
    assert model.config.HasField("dynamic_batching") is dynamic


@pytest.mark.parametrize(
    ("backend_config", "expected"),
    [
        ({"": {"default-max-batch-size": "8"}}, 8),
        ({"": {"default-max-batch-size": "8"}, "openvino": {"default-max-batch-size": "2"}}, 2),
    ],
)
def test_global_default_max_batch_size_reaches_auto_complete(
    load_model: LoadModel,
    repository: ModelRepositoryBuilder,
    sources: Sources,
    backend_config: dict[str, dict[str, str]],
    expected: int,
) -> None:
    """``--backend-config=default-max-batch-size=N`` applies unless the backend's own setting is given."""
    model = load_model(place(repository, "m", None, sources.add_mul_xml), backend_config=backend_config)
    assert model.config.max_batch_size == expected


def test_static_model_does_not_batch(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    model = load_model(place(repository, "m", None, sources.int_xml))
    assert model.config.max_batch_size == 0
    assert not model.config.HasField("dynamic_batching")
    assert _io(model.config) == [("x", "TYPE_INT64", [2, 3]), ("y", "TYPE_INT64", [2, 3])]


def test_static_batch_of_one_without_layout_does_not_batch(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    model = load_model(place(repository, "m", None, sources.static_xml))
    assert model.config.max_batch_size == 0
    assert _io(model.config)[0] == ("INPUT0", "TYPE_FP32", [1, 4])


def test_layout_with_a_batch_dimension_means_batching(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources, tmp_path: Path
) -> None:
    """Triton's rule: the IR's layout names N first; the static batch of 1 becomes dynamic."""
    ov_model = ov.Core().read_model(str(sources.static_xml))
    for port in [*ov_model.inputs, *ov_model.outputs]:
        ov.layout_helpers.set_layout(port, ov.Layout("NC"))
    xml = tmp_path / "layout" / "model.xml"
    ov.save_model(ov_model, str(xml), compress_to_fp16=False)
    model = load_model(place(repository, "m", None, xml))
    assert model.config.max_batch_size == 4
    assert _io(model.config) == ADD_MUL_IO
    inputs = batch_of(3)
    np.testing.assert_allclose(infer(model, inputs)["OUTPUT1"], inputs["INPUT0"] * models.SCALE, rtol=1e-6)


def test_missing_fields_of_listed_tensors_are_filled(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = """
    backend: "openvino"
    max_batch_size: 2
    input [ { name: "INPUT0" dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 } ]
    """
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    assert model.config.max_batch_size == 2
    assert model.config.HasField("dynamic_batching")
    assert _io(model.config) == ADD_MUL_IO


def test_listed_outputs_are_kept_as_a_subset(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = 'backend: "openvino"\noutput [ { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]'
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    assert [t.name for t in model.config.output] == ["OUTPUT1"]
    inputs = batch_of(2)
    assert set(infer(model, inputs)) == {"OUTPUT1"}


def test_full_shape_dims_keep_the_model_unbatched(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    """Dims that include the first dimension rule batching out (max_batch_size stays 0)."""
    config = """
    backend: "openvino"
    input [
      { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] },
      { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 4 ] }
    ]
    """
    model = load_model(place(repository, "m", config, sources.add_mul_xml))
    assert model.config.max_batch_size == 0
    assert not model.config.HasField("dynamic_batching")
    assert [list(t.dims) for t in model.config.output] == [[-1, 4], [-1, 4]]
    inputs = batch_of(5)
    np.testing.assert_allclose(infer(model, inputs)["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"], rtol=1e-6)


def test_auto_complete_disabled_leaves_the_config_alone(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources
) -> None:
    config = """
    backend: "openvino"
    max_batch_size: 8
    input [
      { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
      { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
    ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    """
    model = load_model(place(repository, "m", config, sources.add_mul_xml), auto_complete=False)
    assert not model.config.HasField("dynamic_batching")
    assert [t.name for t in model.config.output] == ["OUTPUT0"]


def test_unsupported_element_type_cannot_be_completed(
    load_model: LoadModel, repository: ModelRepositoryBuilder, sources: Sources, tmp_path: Path
) -> None:
    ov_model = ov.Core().read_model(str(sources.add_mul_xml))
    ppp = ov.preprocess.PrePostProcessor(ov_model)
    ppp.output(1).tensor().set_element_type(ov.Type.bf16)
    xml = tmp_path / "bf16" / "model.xml"
    ov.save_model(ppp.build(), str(xml), compress_to_fp16=False)
    model_dir = place(repository, "m", None, xml)
    with pytest.raises(Exception, match=r"cannot auto-complete output 'OUTPUT1': OpenVINO element type bf16"):
        load_model(model_dir)


def test_files_are_copied_not_shared(sources: Sources, tmp_path: Path) -> None:
    """Sanity check of the fixtures: each repository gets its own copy of the IR."""
    repository = ModelRepositoryBuilder(tmp_path / "models")
    model_dir = place(repository, "m", None, sources.add_mul_xml)
    shutil.rmtree(model_dir)
    assert sources.add_mul_xml.with_suffix(".bin").exists()
