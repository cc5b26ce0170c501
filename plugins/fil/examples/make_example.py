"""Write a tiny FIL example model into a model repository.

    python plugins/fil/examples/make_example.py [REPOSITORY]

creates ``<REPOSITORY>/fil_xgboost_classifier/config.pbtxt`` and ``1/xgboost.ubj``
(default REPOSITORY: ``<repo root>/examples/model_repository``): an XGBoost binary classifier
over 4 FP32 features (is the sum of the first two above 1?), trained here on 200 random rows
with 10 rounds of depth-3 trees. It answers the positive-class probability (``predict_proba``);
drop that parameter to get class ids. Needs xgboost (``pip install 'naiad-fil[cpu]'``).
Nothing binary is committed. A model folder that is already there is kept, edits and all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

MODEL_NAME = "fil_xgboost_classifier"

CONFIG = """\
backend: "fil"
max_batch_size: 1024
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters [
  { key: "model_type" value: { string_value: "xgboost_ubj" } },
  { key: "is_classifier" value: { string_value: "true" } },
  { key: "predict_proba" value: { string_value: "true" } }
]
"""


def make_example(repository: Path) -> Path:
    """Train the model and write it with its config into ``repository``; returns the model directory."""
    import xgboost

    rows = np.random.default_rng(0).random((200, 4), dtype=np.float32)
    labels = (rows[:, 0] + rows[:, 1] > 1.0).astype(np.int32)
    params = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1, "seed": 0}
    booster = xgboost.train(params, xgboost.DMatrix(rows, label=labels), num_boost_round=10)
    model_dir = repository / MODEL_NAME
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(CONFIG)
    booster.save_model(model_dir / "1" / "xgboost.ubj")
    return model_dir


def main() -> None:
    default = Path(__file__).resolve().parents[3] / "examples" / "model_repository"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", nargs="?", type=Path, default=default, help=f"default: {default}")
    repository = parser.parse_args().repository
    if (repository / MODEL_NAME).exists():
        print(f"kept {repository / MODEL_NAME}: it is there already (delete it to generate it afresh)")
        return
    model_dir = make_example(repository)
    print(f"wrote {model_dir}")


if __name__ == "__main__":
    main()
