"""Vendor KServe's ServingRuntime and InferenceService schemas from a KServe release.

    python tests/deploy/schemas/update.py v0.20.0                      # from GitHub
    python tests/deploy/schemas/update.py v0.20.0 --checkout ~/kserve  # from a local clone

Each CRD's ``openAPIV3Schema`` is written unchanged as JSON, with a ``$comment`` naming its source.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import urllib.request
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CRD_PATHS = {
    "servingruntime": "config/crd/full/serving.kserve.io_servingruntimes.yaml",
    "inferenceservice": "config/crd/full/serving.kserve.io_inferenceservices.yaml",
}
SOURCE_URL = "https://github.com/kserve/kserve/blob/{version}/{path}"
RAW_URL = "https://raw.githubusercontent.com/kserve/kserve/{version}/{path}"


def crd_text(version: str, path: str, checkout: Path | None) -> str:
    if checkout is not None:
        return subprocess.run(
            ["git", "-C", str(checkout), "show", f"{version}:{path}"], check=True, capture_output=True, text=True
        ).stdout
    with urllib.request.urlopen(RAW_URL.format(version=version, path=path), timeout=60) as response:
        return str(response.read().decode())


def vendored_schema(crd: dict[str, object], version: str, path: str) -> dict[str, object]:
    (served,) = crd["spec"]["versions"]  # type: ignore[index]
    source = SOURCE_URL.format(version=version, path=path)
    note = f"KServe {version}: {served['name']} openAPIV3Schema of {source}, unchanged."
    return {"$comment": note, **served["schema"]["openAPIV3Schema"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="a KServe release tag, e.g. v0.20.0")
    parser.add_argument("--checkout", type=Path, help="a local clone of kserve/kserve to read the tag from")
    args = parser.parse_args()
    for name, path in CRD_PATHS.items():
        crd = yaml.load(crd_text(args.version, path, args.checkout), Loader=yaml.CSafeLoader)
        target = HERE / f"{name}.json"
        target.write_text(json.dumps(vendored_schema(crd, args.version, path), indent=0) + "\n")
        print(f"wrote {target.relative_to(HERE.parents[2])}")


if __name__ == "__main__":
    main()
