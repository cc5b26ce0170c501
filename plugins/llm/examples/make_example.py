"""Write the tiny example LLM for naiad's llm backend.

    python plugins/llm/examples/make_example.py [MODEL_REPOSITORY]

creates ``<MODEL_REPOSITORY>/llm_tiny/``: ``config.pbtxt`` (just ``backend: "llm"``; auto-complete
adds the rest), ``1/model.json`` (the transformers engine) and ``1/tiny-llama/``, a random-weight
Llama-style model with its own tokenizer, built on the spot (no download). It speaks nonsense; see
plugins/llm/README.md to serve a real model. The files are generated, never committed. A model
folder that is already there is kept, edits and all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from naiad_llm.testing import build_tiny_model, write_model_repository

MODEL_NAME = "llm_tiny"
DEFAULT_REPOSITORY = Path(__file__).resolve().parents[3] / "examples" / "model_repository"


def write_example(repository: Path) -> Path:
    """Write the model into ``repository``; returns the model directory."""
    model_dir = write_model_repository(repository, MODEL_NAME, "tiny-llama")
    build_tiny_model(model_dir / "1" / "tiny-llama")
    return model_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", nargs="?", type=Path, default=DEFAULT_REPOSITORY)
    repository = parser.parse_args().repository
    if (repository / MODEL_NAME).exists():
        print(f"kept {repository / MODEL_NAME}: it is there already (delete it to generate it afresh)")
        return
    print(f"wrote {write_example(repository)}")


if __name__ == "__main__":
    main()
