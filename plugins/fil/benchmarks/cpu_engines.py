"""Time Treelite GTIL against the native libraries on the same small tree models.

Reproduces the CPU-engine measurement in the plugin README::

    python plugins/fil/benchmarks/cpu_engines.py            # all models, default batch sizes
    python plugins/fil/benchmarks/cpu_engines.py --quick    # fewer repeats

For each model (XGBoost binary classifier, LightGBM 3-class classifier, scikit-learn random
forest classifier), every engine predicts the same float32 batch; the script prints the best
per-call time over several repeats (microseconds) and checks that the engines agree.
Needs xgboost (or xgboost-cpu), lightgbm, scikit-learn and treelite.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Predict = Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]

N_FEATURES = 16
N_TREES = 100
MAX_DEPTH = 6


def _data(rows: int, seed: int = 0) -> npt.NDArray[np.float32]:
    return np.random.default_rng(seed).random((rows, N_FEATURES), dtype=np.float32)


def _xgboost(tmp: Path, nthread: int) -> dict[str, Predict]:
    import treelite
    import xgboost

    x = _data(2000)
    y = (x[:, 0] + x[:, 1] > 1.0).astype(np.int32)
    params = {"objective": "binary:logistic", "max_depth": MAX_DEPTH, "nthread": nthread}
    booster = xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=N_TREES)
    path = tmp / "xgboost.ubj"
    booster.save_model(path)
    tl_model = treelite.frontend.load_xgboost_model(path, format_choice="ubjson")
    return {
        "native (inplace_predict)": lambda batch: booster.inplace_predict(batch),
        "treelite GTIL": lambda batch: treelite.gtil.predict(tl_model, batch, nthread=nthread),
    }


def _lightgbm(tmp: Path, nthread: int) -> dict[str, Predict]:
    import lightgbm
    import treelite

    x = _data(2000)
    y = np.digitize(x[:, 0] + x[:, 1], [0.7, 1.3])
    params = {"objective": "multiclass", "num_class": 3, "max_depth": MAX_DEPTH, "verbose": -1, "num_threads": nthread}
    booster = lightgbm.train(params, lightgbm.Dataset(x, label=y), num_boost_round=N_TREES // 3)
    path = tmp / "model.txt"
    booster.save_model(path)
    tl_model = treelite.frontend.load_lightgbm_model(path)
    return {
        "native (Booster.predict)": lambda batch: booster.predict(batch, num_threads=nthread),
        "treelite GTIL": lambda batch: treelite.gtil.predict(tl_model, batch, nthread=nthread),
    }


def _sklearn(tmp: Path, nthread: int) -> dict[str, Predict]:
    import treelite
    import treelite.sklearn
    from sklearn.ensemble import RandomForestClassifier

    x = _data(2000)
    y = (x[:, 0] + x[:, 1] > 1.0).astype(np.int32)
    forest = RandomForestClassifier(n_estimators=N_TREES, max_depth=MAX_DEPTH, random_state=0, n_jobs=nthread)
    forest.fit(x, y)
    path = tmp / "checkpoint.tl"
    treelite.sklearn.import_model(forest).serialize(path)
    tl_model = treelite.Model.deserialize(path)
    return {
        "native (predict_proba)": lambda batch: forest.predict_proba(batch),
        "treelite GTIL": lambda batch: treelite.gtil.predict(tl_model, batch, nthread=nthread),
    }


def _best_us(predict: Predict, batch: npt.NDArray[np.float32], repeats: int) -> float:
    timer = timeit.Timer(lambda: predict(batch))
    number, _ = timer.autorange()
    number = max(1, number // 4)
    return min(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="1,16,256,4096")
    parser.add_argument("--nthread", type=int, default=1, help="threads for every engine (default 1)")
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    args = parser.parse_args()
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
    repeats = 3 if args.quick else 7
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, nthread={args.nthread}")
    print(f"# {N_FEATURES} features, {N_TREES} trees (LightGBM: {N_TREES // 3} rounds x 3 classes), depth {MAX_DEPTH}")
    print("| model | engine | " + " | ".join(f"batch {size}" for size in batch_sizes) + " |")
    print("|---|---|" + "---:|" * len(batch_sizes))
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, build in (
            ("xgboost binary", _xgboost),
            ("lightgbm 3-class", _lightgbm),
            ("sklearn RF", _sklearn),
        ):
            engines = build(Path(tmp), args.nthread)
            check = _data(64, seed=1)
            results = [np.asarray(predict(check)).reshape(64, -1) for predict in engines.values()]
            reference = results[0] if results[0].shape[1] == results[1].shape[1] else results[0][:, 1:]
            np.testing.assert_allclose(results[1], reference, rtol=1e-4, atol=1e-5)
            for engine_name, predict in engines.items():
                times = [_best_us(predict, _data(size, seed=2), repeats) for size in batch_sizes]
                print(f"| {model_name} | {engine_name} | " + " | ".join(f"{t:,.0f} µs" for t in times) + " |")


if __name__ == "__main__":
    main()
