"""Instance groups: several groups, kinds, and what each instance is told about itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ModelRepositoryBuilder, ServerProcess

WHO_AM_I = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        keys = ("model_instance_name", "model_instance_kind", "model_instance_device_id")
        self.identity = ":".join(args[key] for key in keys)

    def execute(self, requests):
        time.sleep(0.02)  # long enough for concurrent requests to spread over the instances
        out = np.array([self.identity.encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHO", out)]) for _ in requests]
"""

CONFIG = """
backend: "python"
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "WHO" data_type: TYPE_STRING dims: [ 1 ] }} ]
{groups}
"""


def test_groups_kinds_and_instance_names(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess]
) -> None:
    groups = {
        "two_groups": 'instance_group [ { count: 1 kind: KIND_CPU }, { name: "extra" count: 2 kind: KIND_CPU } ]',
        "auto_kind": "instance_group [ { kind: KIND_AUTO } ]",
        "model_kind": "instance_group [ { kind: KIND_MODEL } ]",
        "gpu_kind": "instance_group [ { kind: KIND_GPU } ]",
    }
    for name, group in groups.items():
        model_repository.add_python_model(name, WHO_AM_I, CONFIG.format(groups=group))
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)

    config = client.get_model_config("two_groups")
    assert [(g["name"], g["kind"], g["count"]) for g in config["instance_group"]] == [
        ("two_groups_0", "KIND_CPU", 1),
        ("extra", "KIND_CPU", 2),
    ]
    assert client.get_model_config("auto_kind")["instance_group"][0]["kind"] == "KIND_CPU"

    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    requests = [client.async_infer("two_groups", [tensor]) for _ in range(24)]
    names = {request.get_result().as_numpy("WHO")[0].decode().split(":")[0] for request in requests}
    assert names <= {"two_groups_0_0", "extra_0", "extra_1"}
    assert len(names) >= 2

    seen = {client.infer("model_kind", [tensor]).as_numpy("WHO")[0] for _ in range(2)}
    assert seen == {b"model_kind_0_0:MODEL:0"}

    assert not client.is_model_ready("gpu_kind")
    assert "kind KIND_GPU but no GPUs are available" in server.logs()


# Marks each instance it initializes with a file in the folder its MARKERS parameter names.
MARKING_WHO_AM_I = WHO_AM_I.replace(
    '        self.identity = ":".join(args[key] for key in keys)\n',
    '        self.identity = ":".join(args[key] for key in keys)\n'
    "        import json, pathlib\n"
    '        markers = json.loads(args["model_config"])["parameters"]["MARKERS"]["string_value"]\n'
    '        (pathlib.Path(markers) / args["model_instance_name"]).touch()\n',
)


def test_a_passive_group_is_loaded_but_never_given_requests(
    model_repository: ModelRepositoryBuilder, naiad_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    groups = (
        'instance_group [ { count: 1 kind: KIND_CPU }, { name: "standby" count: 2 kind: KIND_CPU passive: true } ]\n'
        f'parameters {{ key: "MARKERS" value: {{ string_value: "{markers}" }} }}'
    )
    model_repository.add_python_model("with_standby", MARKING_WHO_AM_I, CONFIG.format(groups=groups))
    all_passive = "instance_group [ { count: 1 kind: KIND_CPU passive: true } ]\n" + groups.split("\n")[1]
    model_repository.add_python_model("only_standby", MARKING_WHO_AM_I, CONFIG.format(groups=all_passive))
    server = naiad_server(model_repository.root)
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    assert sorted(path.name for path in markers.iterdir()) == [
        "only_standby_0_0",
        "standby_0",
        "standby_1",
        "with_standby_0_0",
    ]
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    requests = [client.async_infer("with_standby", [tensor]) for _ in range(12)]
    names = {request.get_result().as_numpy("WHO")[0].decode().split(":")[0] for request in requests}
    assert names == {"with_standby_0_0"}  # as in Triton: the passive instances run nothing
    assert not client.is_model_ready("only_standby")
    assert "every instance_group is passive; set passive: false on at least one" in server.logs()
