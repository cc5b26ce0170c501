"""Tiny real tree models, trained in-process, with the library's own predictions as reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
N_FEATURES = 4


def features(rows: int, seed: int) -> npt.NDArray[np.float32]:
    return np.random.default_rng(seed).random((rows, N_FEATURES), dtype=np.float32)


TRAIN = features(120, seed=0)
TEST = features(8, seed=1)


@dataclass
class Trained:
    """A model file's bytes and the library's in-process predictions (``[n, k]`` float arrays)."""

    filename: str
    content: bytes
    scores: Callable[[Array], Array]
    classes: Callable[[Array], Array] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _columns(array: Array) -> Array:
    return np.asarray(array, dtype=np.float64).reshape(len(array), -1)


def _save(save: Callable[[Path], None], tmp: Path, filename: str) -> bytes:
    path = tmp / filename
    save(path)
    return path.read_bytes()


def xgboost_binary(tmp: Path, filename: str = "xgboost.json") -> Trained:
    import xgboost

    labels = (TRAIN[:, 0] + TRAIN[:, 1] > 1.0).astype(np.int32)
    params = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1, "seed": 0}
    booster = xgboost.train(params, xgboost.DMatrix(TRAIN, label=labels), num_boost_round=5)
    # XGBoost >= 2.1 writes UBJSON for any name but .json, with a warning; name the format explicitly.
    suffix = ".json" if filename.endswith(".json") else ".ubj"
    content = _save(lambda path: booster.save_model(path), tmp, "binary" + suffix)
    return Trained(filename, content, lambda x: _columns(booster.predict(xgboost.DMatrix(x))))


def xgboost_regressor(tmp: Path, filename: str = "xgboost.ubj") -> Trained:
    import xgboost

    target = TRAIN[:, 0] * 3.0 - TRAIN[:, 2]
    params = {"objective": "reg:squarederror", "max_depth": 3, "nthread": 1, "seed": 0}
    booster = xgboost.train(params, xgboost.DMatrix(TRAIN, label=target), num_boost_round=5)
    content = _save(lambda path: booster.save_model(path), tmp, "regressor.ubj")
    return Trained(filename, content, lambda x: _columns(booster.predict(xgboost.DMatrix(x))))


def lightgbm_multiclass(tmp: Path) -> Trained:
    import lightgbm

    labels = np.digitize(TRAIN[:, 0] + TRAIN[:, 1], [0.7, 1.3])
    params = {
        "objective": "multiclass",
        "num_class": 3,
        "num_leaves": 4,
        "min_data_in_leaf": 5,
        "verbose": -1,
        "num_threads": 1,
        "seed": 0,
    }
    booster = lightgbm.train(params, lightgbm.Dataset(TRAIN, label=labels), num_boost_round=4)
    content = _save(lambda path: booster.save_model(path), tmp, "model.txt")
    return Trained(
        "model.txt",
        content,
        lambda x: _columns(booster.predict(x)),
        lambda x: _columns(booster.predict(x).argmax(axis=1)),
    )


def sklearn_forest_classifier(tmp: Path) -> Trained:
    import treelite.sklearn
    from sklearn.ensemble import RandomForestClassifier

    labels = (TRAIN[:, 0] > TRAIN[:, 3]).astype(np.int32)
    # 5 unlimited-depth trees: pure leaves, so class probabilities are multiples of 1/5 (no ties).
    forest = RandomForestClassifier(n_estimators=5, random_state=0, n_jobs=1).fit(TRAIN, labels)
    content = _save(lambda path: treelite.sklearn.import_model(forest).serialize(path), tmp, "checkpoint.tl")
    return Trained(
        "checkpoint.tl",
        content,
        lambda x: _columns(forest.predict_proba(x)),
        lambda x: _columns(forest.predict(x)),
    )


def sklearn_forest_regressor(tmp: Path) -> Trained:
    import treelite.sklearn
    from sklearn.ensemble import RandomForestRegressor

    target = TRAIN[:, 1] * 2.0 + TRAIN[:, 2]
    forest = RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0, n_jobs=1).fit(TRAIN, target)
    content = _save(lambda path: treelite.sklearn.import_model(forest).serialize(path), tmp, "checkpoint.tl")
    return Trained("checkpoint.tl", content, lambda x: _columns(forest.predict(x)))
