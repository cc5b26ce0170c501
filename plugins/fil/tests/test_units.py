"""The plugin's pieces in-process: parameters, file resolution, engines and FIL's output rules."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from google.protobuf import text_format

from naiad.backend import ModelConfig, ModelLoadContext, NaiadError
from naiad_fil.engines import Engine, load_cpu_engine
from naiad_fil.files import ModelSource, locate
from naiad_fil.model import FilModel
from naiad_fil.parameters import FilParameters, parse_parameters
from naiad_fil.postprocess import OutputRule

from . import models
from .conftest import fil_config


def _config(text: str, name: str = "m") -> ModelConfig:
    config = text_format.Parse(text, ModelConfig())
    config.name = name
    return config


# -- parameters ------------------------------------------------------------------------------


def test_parameter_defaults_are_tritons() -> None:
    assert parse_parameters(_config(fil_config())) == FilParameters()


def test_parameters_are_parsed() -> None:
    params = parse_parameters(
        _config(
            fil_config(
                model_type="lightgbm",
                is_classifier="True",
                predict_proba="1",
                threshold="0.25",
                xgboost_allow_unknown_field="true",
                cpu_nthread="2",
                chunk_size="8",
                layout="layered",
                transfer_threshold="3",
                naiad_cpu_engine="treelite",
            )
        )
    )
    assert params == FilParameters("lightgbm", True, True, 0.25, True, 2, 8, "layered", 3, "treelite")


def test_output_class_is_a_deprecated_alias(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="naiad.fil"):
        params = parse_parameters(_config(fil_config(output_class="true")))
    assert params.is_classifier is True
    assert "parameter 'output_class' is deprecated" in caplog.text


def test_output_class_contradicting_is_classifier_is_an_error() -> None:
    with pytest.raises(NaiadError, match="'output_class' has value 'false', contradicts is_classifier 'True'"):
        parse_parameters(_config(fil_config(is_classifier="true", output_class="false")))


def test_removed_and_unknown_parameters_are_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="naiad.fil"):
        params = parse_parameters(
            _config(fil_config(algo="NAIVE", storage_type="SPARSE", threads_per_tree="4", foo="1"))
        )
    assert params == FilParameters()
    assert "'algo' is replaced by 'layout'" in caplog.text
    assert "'storage_type' is removed" in caplog.text
    assert "'threads_per_tree' is replaced by 'chunk_size'" in caplog.text
    assert "parameter 'foo' is not a FIL backend parameter" in caplog.text


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("chunk_size", "3", "expected a power of 2 from 1 to 32"),
        ("layout", "dense", "expected one of 'depth_first', 'breadth_first', 'layered'"),
        ("predict_proba", "maybe", 'expected "true" or "false"'),
        ("cpu_nthread", "all", "expected an integer"),
        ("transfer_threshold", "-1", "expected an integer >= 0"),
    ],
)
def test_bad_parameter_values(key: str, value: str, message: str) -> None:
    with pytest.raises(NaiadError, match=f"model 'm': FIL parameter '{key}' has value '{value}', {message}"):
        parse_parameters(_config(fil_config(**{key: value})))


# -- model files -----------------------------------------------------------------------------


def _context(model_dir: Path, config: ModelConfig) -> ModelLoadContext:
    return ModelLoadContext(model_name="m", version=1, model_dir=model_dir, config=config, auto_complete=True)


def test_default_file_per_model_type_and_default_model_filename(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.txt").write_text("tree")
    (tmp_path / "1" / "custom.bin").write_text("tree")
    assert locate(_context(tmp_path, _config("")), "lightgbm").path == tmp_path / "1" / "model.txt"
    named = _config('default_model_filename: "custom.bin"')
    assert locate(_context(tmp_path, named), "lightgbm").path == tmp_path / "1" / "custom.bin"


@pytest.mark.parametrize(("content", "fmt"), [(b'{"learner": {}}', "xgboost_json"), (b"{L\x00\x00", "xgboost_ubj")])
def test_legacy_model_type_reads_json_and_ubjson_files(tmp_path: Path, content: bytes, fmt: str) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "xgboost.model").write_bytes(content)
    assert locate(_context(tmp_path, _config("")), "xgboost").format == fmt


def test_binary_file_keeps_the_legacy_format(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "xgboost.model").write_bytes(b"\x00\x00\x00\x3f binary")
    assert locate(_context(tmp_path, _config("")), "xgboost").format == "xgboost"


# -- engines ---------------------------------------------------------------------------------


def _source(tmp_path: Path, trained: models.Trained, fmt: str) -> ModelSource:
    path = tmp_path / trained.filename
    path.write_bytes(trained.content)
    return ModelSource("m", path, fmt)


@pytest.mark.parametrize("engine", ["native", "treelite"])
@pytest.mark.parametrize(
    ("train", "fmt", "outputs", "classifier"),
    [
        (models.xgboost_binary, "xgboost_json", 1, True),
        (models.xgboost_regressor, "xgboost_ubj", 1, False),
        (models.lightgbm_multiclass, "lightgbm", 3, True),
    ],
)
def test_native_and_treelite_engines_match_the_library(
    tmp_path: Path, train: object, fmt: str, outputs: int, classifier: bool, engine: str
) -> None:
    trained = train(tmp_path)  # type: ignore[operator]
    loaded = load_cpu_engine(_source(tmp_path, trained, fmt), FilParameters(cpu_engine=engine, cpu_nthread=1))
    try:
        assert (engine == "native") == ("native" in loaded.description)
        assert (loaded.facts.num_features, loaded.facts.num_outputs, loaded.facts.classifier) == (
            4,
            outputs,
            classifier,
        )
        np.testing.assert_allclose(loaded.predict(models.TEST), trained.scores(models.TEST), rtol=1e-5, atol=1e-6)
    finally:
        loaded.close()


@pytest.mark.parametrize(
    ("train", "outputs", "classifier"),
    [(models.sklearn_forest_classifier, 2, True), (models.sklearn_forest_regressor, 1, False)],
)
def test_treelite_checkpoint_matches_scikit_learn(
    tmp_path: Path, train: object, outputs: int, classifier: bool
) -> None:
    trained = train(tmp_path)  # type: ignore[operator]
    loaded = load_cpu_engine(_source(tmp_path, trained, "treelite_checkpoint"), FilParameters())
    assert (loaded.facts.num_outputs, loaded.facts.classifier) == (outputs, classifier)
    np.testing.assert_allclose(loaded.predict(models.TEST), trained.scores(models.TEST), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("train", "fmt"), [(models.xgboost_binary, "xgboost_json"), (models.lightgbm_multiclass, "lightgbm")]
)
def test_treelite_serves_when_the_native_library_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: object, fmt: str
) -> None:
    trained = train(tmp_path)  # type: ignore[operator]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    source = _source(tmp_path, trained, fmt)
    loaded = load_cpu_engine(source, FilParameters())
    assert "GTIL" in loaded.description
    np.testing.assert_allclose(loaded.predict(models.TEST), trained.scores(models.TEST), rtol=1e-5, atol=1e-6)
    with pytest.raises(NaiadError, match=r"naiad_cpu_engine 'native' needs the \w+ package"):
        load_cpu_engine(source, FilParameters(cpu_engine="native"))


def test_native_engine_for_a_checkpoint_is_an_error(tmp_path: Path) -> None:
    source = _source(tmp_path, models.sklearn_forest_regressor(tmp_path), "treelite_checkpoint")
    with pytest.raises(NaiadError, match="naiad_cpu_engine 'native' needs an XGBoost or LightGBM file"):
        load_cpu_engine(source, FilParameters(cpu_engine="native"))


def test_unknown_json_field_needs_xgboost_allow_unknown_field(tmp_path: Path) -> None:
    trained = models.xgboost_binary(tmp_path)
    trained.content = trained.content.replace(b'{"learner":{', b'{"learner":{"naiad_extra":1,', 1)
    assert b"naiad_extra" in trained.content
    source = _source(tmp_path, trained, "xgboost_json")
    with pytest.raises(NaiadError, match="Provided JSON could not be parsed as XGBoost model"):
        load_cpu_engine(source, FilParameters(cpu_engine="treelite"))
    with pytest.warns(UserWarning, match='unknown key "naiad_extra"'):
        loaded = load_cpu_engine(source, FilParameters(cpu_engine="treelite", xgboost_allow_unknown_field=True))
    np.testing.assert_allclose(loaded.predict(models.TEST), trained.scores(models.TEST), rtol=1e-5)


# -- output rules ----------------------------------------------------------------------------

SCORES = np.array([[0.2], [0.5], [0.7]])
MULTI = np.array([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3], [0.3, 0.3, 0.4]])


def test_binary_class_ids_use_a_strict_threshold() -> None:
    np.testing.assert_array_equal(OutputRule(True, False, 0.5, 1).apply(SCORES), [[0], [0], [1]])
    np.testing.assert_array_equal(OutputRule(True, False, 0.3, 1).apply(SCORES), [[0], [1], [1]])


def test_multiclass_class_ids_are_the_argmax() -> None:
    rule = OutputRule(True, False, 0.5, 3)
    assert rule.width == 1
    np.testing.assert_array_equal(rule.apply(MULTI), [[1], [0], [2]])


def test_probabilities() -> None:
    np.testing.assert_allclose(OutputRule(True, True, 0.5, 3).apply(MULTI), MULTI)
    np.testing.assert_allclose(OutputRule(True, True, 0.5, 1).apply(SCORES), SCORES)
    both = OutputRule(True, True, 0.5, 1, binary_as_two_columns=True)
    assert both.width == 2
    np.testing.assert_allclose(both.apply(SCORES), [[0.8, 0.2], [0.5, 0.5], [0.3, 0.7]])
    assert OutputRule(True, True, 0.5, 1).accepted_widths() == (1, 2)


def test_regressors_pass_scores_through() -> None:
    rule = OutputRule(False, True, 0.5, 1)
    assert rule.apply(SCORES).dtype == np.float32
    np.testing.assert_allclose(rule.apply(SCORES), SCORES)


# -- the load-time engine ------------------------------------------------------------------------


class _Recording:
    """A real engine that notes when it is closed."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.description = engine.description
        self.facts = engine.facts
        self.closed = 0

    def predict(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        return self.engine.predict(rows)

    def close(self) -> None:
        self.closed += 1
        self.engine.close()


def _model_with_load_engine(tmp_path: Path) -> tuple[FilModel, _Recording]:
    trained = models.xgboost_binary(tmp_path)
    params = FilParameters(cpu_nthread=1)
    engine = _Recording(load_cpu_engine(_source(tmp_path, trained, "xgboost_json"), params))
    rule = OutputRule(True, False, 0.5, engine.facts.num_outputs)
    return FilModel(_source(tmp_path, trained, "xgboost_json"), params, engine.facts, rule, engine), engine


def test_the_load_time_engine_serves_the_first_cpu_instance(tmp_path: Path) -> None:
    model, engine = _model_with_load_engine(tmp_path)
    model.configured(_config("instance_group [ { kind: KIND_CPU count: 2 } ]"))
    first, second = model.engine_for("CPU", 0), model.engine_for("CPU", 0)
    assert first is engine
    assert second is not engine
    second.close()
    model.finalize()
    assert engine.closed == 0  # the instance owns it now


def test_a_model_without_cpu_instances_closes_the_load_time_engine_once_configured(tmp_path: Path) -> None:
    model, engine = _model_with_load_engine(tmp_path)
    model.configured(_config("instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]"))
    assert engine.closed == 1
    model.finalize()
    assert engine.closed == 1
