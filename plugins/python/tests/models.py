"""Tiny Triton python-backend models that tests write into a temporary model repository.

Each model is a :class:`PythonModelSpec` (``model.py`` source, optional ``config.pbtxt`` and
extra files); :func:`write_model` materialises it as ``<repo>/<name>/config.pbtxt`` and
``<repo>/<name>/<version>/model.py``. The sources are plain Triton models, usable against a
real Triton server too.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class PythonModelSpec:
    """A python model: its ``model.py``, its config (None = no config.pbtxt) and other files.

    ``files`` paths are relative to the version directory; ``model_dir_files`` to the model
    directory.
    """

    model_py: str
    config: str | None
    files: dict[str, str] = field(default_factory=dict)
    model_dir_files: dict[str, str] = field(default_factory=dict)


def isolated(spec: PythonModelSpec, mode: str) -> PythonModelSpec:
    """``spec`` with its ``INSTANCE_ISOLATION`` parameter set to ``mode`` ("thread" or "process")."""
    assert spec.config is not None
    parameter = f'parameters {{ key: "INSTANCE_ISOLATION" value: {{ string_value: "{mode}" }} }}'
    return replace(spec, config=textwrap.dedent(spec.config).strip() + "\n" + parameter)


def write_model(repo: Path, name: str, spec: PythonModelSpec, *, version: int = 1) -> Path:
    """Write ``spec`` as model ``name`` into ``repo``; returns the model directory."""
    model_dir = repo / name
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    (version_dir / "model.py").write_text(textwrap.dedent(spec.model_py).lstrip(), encoding="utf-8")
    if spec.config is not None:
        config = textwrap.dedent(spec.config).strip().replace("{name}", name)
        (model_dir / "config.pbtxt").write_text(config + "\n", encoding="utf-8")
    for relative, text in spec.files.items():
        path = version_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    for relative, text in spec.model_dir_files.items():
        path = model_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return model_dir


# -- add_sub: Triton's examples/add_sub ------------------------------------------------------

ADD_SUB = PythonModelSpec(
    model_py="""
    import json

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.args = args
            self.model_config = model_config = json.loads(args["model_config"])
            output0_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT0")
            output1_config = pb_utils.get_output_config_by_name(model_config, "OUTPUT1")
            self.output0_dtype = pb_utils.triton_string_to_numpy(output0_config["data_type"])
            self.output1_dtype = pb_utils.triton_string_to_numpy(output1_config["data_type"])

        def execute(self, requests):
            responses = []
            for request in requests:
                in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
                in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1")
                out_0 = in_0.as_numpy() + in_1.as_numpy()
                out_1 = in_0.as_numpy() - in_1.as_numpy()
                out_tensor_0 = pb_utils.Tensor("OUTPUT0", out_0.astype(self.output0_dtype))
                out_tensor_1 = pb_utils.Tensor("OUTPUT1", out_1.astype(self.output1_dtype))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out_tensor_0, out_tensor_1]))
            return responses

        def finalize(self):
            pass
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [
      { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
      { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
    ]
    output [
      { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
      { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
    ]
    instance_group [ { kind: KIND_CPU count: 1 } ]
    """,
)

# -- BYTES identity (+ an upper-cased str output) --------------------------------------------

BYTES_IDENTITY = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                if data.dtype != np.object_ or not all(type(item) is bytes for item in data.flat):
                    raise TypeError(f"expected an object array of bytes, got {data.dtype}")
                upper = np.array([item.decode("utf-8").upper() for item in data.flat], dtype=np.object_)
                responses.append(
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("OUTPUT0", data),
                            pb_utils.Tensor("OUTPUT1", upper.reshape(data.shape)),
                        ]
                    )
                )
            return responses
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
    output [
      { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] },
      { name: "OUTPUT1" data_type: TYPE_STRING dims: [ -1 ] }
    ]
    """,
)

# -- decoupled repeat: one response per input element, sent from a thread ---------------------

DECOUPLED_REPEAT = PythonModelSpec(
    model_py="""
    import threading

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.config = json_config = __import__("json").loads(args["model_config"])
            if not pb_utils.using_decoupled_model_transaction_policy(json_config):
                raise pb_utils.TritonModelException("this model must be decoupled")
            self.threads = []

        def execute(self, requests):
            for request in requests:
                values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
                sender = request.get_response_sender()
                thread = threading.Thread(target=self._repeat, args=(sender, values))
                thread.start()
                self.threads.append(thread)
            return None

        def _repeat(self, sender, values):
            for value in values:
                tensor = pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse([tensor]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

        def finalize(self):
            for thread in self.threads:
                thread.join()
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
    """,
)

# -- auto_complete_config without config.pbtxt -------------------------------------------------

DECOUPLED_REUSED_BUFFER = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                sender = request.get_response_sender()
                buffer = np.zeros([1], dtype=np.int32)  # one array, refilled for each response
                for value in pb_utils.get_input_tensor_by_name(request, "IN").as_numpy():
                    buffer[0] = value
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", buffer)]))
                buffer[0] = -1
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
    """,
    config=DECOUPLED_REPEAT.config,
)

AUTO_COMPLETE = PythonModelSpec(
    model_py="""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(auto_complete_model_config):
            auto_complete_model_config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]})
            auto_complete_model_config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})
            auto_complete_model_config.set_max_batch_size(8)
            auto_complete_model_config.set_dynamic_batching()
            return auto_complete_model_config

        def execute(self, requests):
            responses = []
            for request in requests:
                data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data * 2)]))
            return responses
    """,
    config=None,
)

# -- error paths, selected by the request parameter "mode" -------------------------------------

_FP32_IN_OUT = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

ERRORS = PythonModelSpec(
    model_py="""
    import json

    import triton_python_backend_utils as pb_utils


    def _ok(request):
        data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)])


    class Stop(BaseException):
        pass


    class TritonPythonModel:
        def execute(self, requests):
            mode = json.loads(requests[0].parameters()).get("mode", "ok")
            if mode == "raise":
                raise ValueError("boom")
            if mode == "short":
                return [_ok(r) for r in requests][:-1]
            if mode == "tuple":
                return tuple(_ok(r) for r in requests)
            if mode == "bad_item":
                return ["not a response" for r in requests]
            if mode == "invalid_arg":
                error = pb_utils.TritonError("INPUT0 must not be empty", pb_utils.TritonError.INVALID_ARG)
                return [pb_utils.InferenceResponse(error=error) for r in requests]
            if mode == "default_code":
                return [pb_utils.InferenceResponse(error=pb_utils.TritonError("plain")) for r in requests]
            if mode == "exit":
                raise SystemExit(3)
            if mode == "interrupt":
                raise KeyboardInterrupt
            if mode == "base":
                raise Stop("no more")
            return [_ok(r) for r in requests]
    """,
    config=_FP32_IN_OUT,
)

RAISE_IN_INITIALIZE = PythonModelSpec(
    model_py="""
    class TritonPythonModel:
        def initialize(self, args):
            raise RuntimeError("no weights found")

        def execute(self, requests):
            return []
    """,
    config=_FP32_IN_OUT,
)

# -- exceptions whose reports list their frames (the At: block) -----------------------------------

TRACEBACKS = PythonModelSpec(
    model_py="""
    import json

    from helpers import check


    def convert(value):
        return check(value) * 2


    class TritonPythonModel:
        def execute(self, requests):
            mode = json.loads(requests[0].parameters()).get("mode", "")
            if mode == "nested":
                return convert(-1)
            if mode == "chained":
                try:
                    convert(-1)
                except ValueError as error:
                    raise RuntimeError("could not convert") from error
            if mode == "empty":
                raise RuntimeError()
            if mode == "multiline":
                raise ValueError("first line\\nsecond line")
            raise RuntimeError("model exploded")
    """,
    config=_FP32_IN_OUT,
    files={
        "helpers.py": """
        def check(value):
            if value < 0:
                raise ValueError(f"negative value {value}")
            return value
        """
    },
)

TRACEBACKS_DECOUPLED = replace(
    TRACEBACKS,
    config=_FP32_IN_OUT.replace("max_batch_size: 0", "max_batch_size: 0\nmodel_transaction_policy { decoupled: true }"),
)

INITIALIZE_FAILS_DEEP = PythonModelSpec(
    model_py="""
    def load_weights(path):
        raise RuntimeError(f"no weights in {path}")


    class TritonPythonModel:
        def initialize(self, args):
            load_weights("weights.bin")

        def execute(self, requests):
            return []
    """,
    config=_FP32_IN_OUT,
)

NO_EXECUTE = PythonModelSpec(
    model_py="""
    class TritonPythonModel:
        pass
    """,
    config=_FP32_IN_OUT,
)

# -- response senders in a non-decoupled model, selected by the "mode" parameter ---------------

SENDER_MODES = PythonModelSpec(
    model_py="""
    import json
    import os
    import threading
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils

    FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


    def _response(request):
        data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data)])


    def _error_text(call):
        try:
            call()
        except pb_utils.TritonModelException as error:
            return str(error)
        return "no error"


    class TritonPythonModel:
        def execute(self, requests):
            returned = []
            for request in requests:
                mode = json.loads(request.parameters())["mode"]
                # a model that takes a request's sender may answer it after execute returns
                sender = None if mode in ("plain", "return_none_item") else request.get_response_sender()
                if mode == "send_final_return_none":
                    sender.send(_response(request), flags=FINAL)
                    returned = None
                elif mode == "send_final_return_list_none":
                    sender.send(_response(request), flags=FINAL)
                    returned.append(None)
                elif mode == "send_then_flag":
                    sender.send(_response(request))
                    sender.send(flags=FINAL)
                    returned.append(None)
                elif mode == "send_without_final":
                    sender.send(_response(request))
                    returned.append(None)
                elif mode == "return_none_item":
                    returned.append(None)
                elif mode == "send_after_return":

                    def answer_later(sender=sender, response=_response(request)):
                        time.sleep(0.2)
                        sender.send(response)
                        sender.send(flags=FINAL)

                    threading.Thread(target=answer_later).start()
                    returned.append(None)
                elif mode == "send_twice_then_raise":
                    sender.send(_response(request))
                    sender.send(_response(request))  # raises: a second response; the first stands
                elif mode == "send_and_return":
                    sender.send(_response(request), flags=FINAL)
                    returned.append(_response(request))
                elif mode == "rules":
                    texts = [
                        _error_text(lambda: sender.send(flags=FINAL)),
                        _error_text(lambda: sender.send(_response(request), flags=2)),
                        _error_text(lambda: sender.send()),
                    ]
                    sender.send(_response(request), flags=FINAL)
                    texts.append(_error_text(lambda: sender.send(_response(request))))
                    texts.append(_error_text(lambda: sender.send(flags=FINAL)))
                    with open(os.path.join(pb_utils.get_model_dir(), "rule_texts.json"), "w") as file:
                        json.dump(texts, file)  # the test reads them, in whichever process the model runs
                    returned.append(None)
                else:
                    returned.append(_response(request))
            return returned
    """,
    config=_FP32_IN_OUT,
)

# -- request/response metadata ------------------------------------------------------------------

METADATA = PythonModelSpec(
    model_py="""
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    def _text(value):
        return pb_utils.Tensor("X", np.array([json.dumps(value).encode()], dtype=np.object_))


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                info = {
                    "request_id": request.request_id(),
                    "correlation_id": request.correlation_id(),
                    "flags": request.flags(),
                    "timeout": request.timeout(),
                    "parameters": json.loads(request.parameters()),
                    "parameters_text": request.parameters(),
                    "requested": sorted(request.requested_output_names()),
                    "requested_type": type(request.requested_output_names()).__name__,
                    "inputs": [t.name() for t in request.inputs()],
                    "shape": pb_utils.get_input_tensor_by_name(request, "INPUT0").shape(),
                    "dtype": pb_utils.get_input_tensor_by_name(request, "INPUT0").triton_dtype(),
                    "cancelled": request.is_cancelled(),
                    "trace": request.trace().get_context(),
                }
                info_tensor = pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_))
                extra = pb_utils.Tensor("EXTRA", np.array([1], dtype=np.int32))
                undeclared = pb_utils.Tensor("UNDECLARED", np.array([2], dtype=np.int32))
                outputs = [info_tensor, extra, undeclared]
                responses.append(pb_utils.InferenceResponse(outputs, parameters={"answered": True}))
            return responses
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 4
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [
      { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "EXTRA" data_type: TYPE_INT32 dims: [ 1 ] }
    ]
    """,
)

# -- async execute -------------------------------------------------------------------------------

ASYNC_EXECUTE = PythonModelSpec(
    model_py="""
    import asyncio
    import json

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            await asyncio.sleep(0.01)
            if json.loads(requests[0].parameters()).get("mode") == "raise":
                raise KeyError("async boom")
            if json.loads(requests[0].parameters()).get("mode") == "interrupt":
                raise KeyboardInterrupt("stop")
            responses = []
            for request in requests:
                data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data + 1)]))
            return responses
    """,
    config=_FP32_IN_OUT,
)

ASYNC_DECOUPLED = PythonModelSpec(
    model_py="""
    import asyncio
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            for request in requests:
                sender = request.get_response_sender()
                count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                for index in range(count):
                    await asyncio.sleep(0.001)
                    tensor = pb_utils.Tensor("OUT", np.array([index], np.int32))
                    sender.send(pb_utils.InferenceResponse([tensor]))
                if json.loads(request.parameters()).get("mode") == "raise":
                    raise RuntimeError("failed half way")
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
    """,
)

DECOUPLED_RETURNS_LIST = PythonModelSpec(
    model_py="""
    class TritonPythonModel:
        def execute(self, requests):
            return []
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
    """,
)

# -- imports, isolation and get_model_dir ----------------------------------------------------------


def isolation_model(label: str) -> PythonModelSpec:
    """A model whose sibling ``helpers.py`` carries ``label`` and a counter.

    Outputs: LABEL (from ``import helpers``), SAME (``from . import helpers`` and a lazy
    ``import helpers`` inside ``execute`` give the same module), COUNT (a model.py global
    and a helpers global, both bumped per execute), MODEL_DIR (``get_model_dir()`` from
    model.py, from helpers, from a thread and at import time), SHARED (from
    ``shared_util.py`` in the model directory).
    """
    return PythonModelSpec(
        model_py="""
        import threading

        import numpy as np
        import triton_python_backend_utils as pb_utils

        import helpers
        import shared_util
        from . import helpers as relative_helpers
        from .helpers import where as helper_where

        COUNTER = 0
        DIR_AT_IMPORT = pb_utils.get_model_dir()


        def _bytes(*values):
            return np.array([v.encode() for v in values], dtype=np.object_)


        class TritonPythonModel:
            def execute(self, requests):
                global COUNTER
                COUNTER += 1
                import helpers as lazily

                seen = []
                thread = threading.Thread(target=lambda: seen.append(pb_utils.get_model_dir()))
                thread.start()
                thread.join()
                dirs = _bytes(pb_utils.get_model_dir(), helper_where(), seen[0], DIR_AT_IMPORT)
                return [
                    pb_utils.InferenceResponse(
                        [
                            pb_utils.Tensor("LABEL", _bytes(helpers.LABEL)),
                            pb_utils.Tensor("SAME", np.array([relative_helpers is helpers is lazily])),
                            pb_utils.Tensor("COUNT", np.array([COUNTER, helpers.bump()], dtype=np.int64)),
                            pb_utils.Tensor("MODEL_DIR", dirs),
                            pb_utils.Tensor("SHARED", _bytes(shared_util.NAME)),
                        ]
                    )
                    for request in requests
                ]
        """,
        config="""
        name: "{name}"
        backend: "python"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [
          { name: "LABEL" data_type: TYPE_STRING dims: [ 1 ] },
          { name: "SAME" data_type: TYPE_BOOL dims: [ 1 ] },
          { name: "COUNT" data_type: TYPE_INT64 dims: [ 2 ] },
          { name: "MODEL_DIR" data_type: TYPE_STRING dims: [ 4 ] },
          { name: "SHARED" data_type: TYPE_STRING dims: [ 1 ] }
        ]
        instance_group [ { kind: KIND_CPU count: 2 } ]
        """,
        files={
            "helpers.py": f'''
            import triton_python_backend_utils as pb_utils

            LABEL = "{label}"
            STATE = {{"count": 0}}


            def bump():
                STATE["count"] += 1
                return STATE["count"]


            def where():
                return pb_utils.get_model_dir()
            ''',
        },
        model_dir_files={"shared_util.py": f'NAME = "shared-{label}"\n'},
    )


LIFECYCLE = PythonModelSpec(
    model_py="""
    import json
    from pathlib import Path

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.args = args
            self.ready = True

        def execute(self, requests):
            args = pb_utils.Tensor("ARGS", np.array([json.dumps(self.args).encode()], dtype=np.object_))
            self.ready = json.loads(requests[0].parameters()).get("ready", True)
            return [pb_utils.InferenceResponse([args]) for r in requests]

        def is_ready(self):
            return self.ready

        def finalize(self):
            name = self.args["model_instance_name"]
            (Path(pb_utils.get_model_dir()) / f"finalized-{name}").write_text("bye")
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "ARGS" data_type: TYPE_STRING dims: [ 1 ] } ]
    """,
)


def readiness_model(is_ready: str) -> PythonModelSpec:
    """A model (IN -> OUT, a copy) whose ``TritonPythonModel`` has ``is_ready`` as given (a method's source).

    Its module imports ``asyncio``, ``threading`` and ``time`` for the method to use.
    """
    return PythonModelSpec(
        model_py=f"""
        import asyncio
        import threading
        import time

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                return [
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())]
                    )
                    for request in requests
                ]

{textwrap.indent(textwrap.dedent(is_ready).strip(), " " * 12)}
        """,
        config="""
        name: "{name}"
        backend: "python"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        """,
    )


# -- custom metrics and model control ---------------------------------------------------------


def metrics_model(prefix: str) -> PythonModelSpec:
    """VALUE -> COUNT: counts requests, keeps the last value and a histogram of the values.

    Its families are ``<prefix>_requests`` (counter), ``<prefix>_last`` (gauge) and
    ``<prefix>_values`` (histogram, buckets 1, 5, 10), each with one series labelled
    ``model="<model name>"``; two instances share them. COUNT is the counter's value.
    """
    return PythonModelSpec(
        model_py="""
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                labels = {"model": args["model_name"]}
                family = pb_utils.MetricFamily
                self.requests = family("PREFIX_requests", "Requests executed", family.COUNTER).Metric(labels=labels)
                self.last = family("PREFIX_last", "Last value seen", family.GAUGE).Metric(labels=labels)
                self.values = family("PREFIX_values", "Values seen", family.HISTOGRAM).Metric(
                    labels=labels, buckets=[1.0, 5.0, 10.0]
                )

            def execute(self, requests):
                responses = []
                for request in requests:
                    value = float(pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy().sum())
                    self.requests.increment(1)
                    self.last.set(value)
                    self.values.observe(value)
                    count = np.array([self.requests.value()], dtype=np.float64)
                    responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("COUNT", count)]))
                return responses
        """.replace("PREFIX", prefix),
        config="""
        name: "{name}"
        backend: "python"
        max_batch_size: 0
        input [ { name: "VALUE" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "COUNT" data_type: TYPE_FP64 dims: [ 1 ] } ]
        instance_group [ { kind: KIND_CPU count: 2 } ]
        """,
    )


METRIC_ERRORS = PythonModelSpec(
    model_py="""
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils

    family = pb_utils.MetricFamily


    def counter():
        return family("errors_counter", "d", family.COUNTER).Metric()


    def histogram():
        return family("errors_histogram", "d", family.HISTOGRAM).Metric(buckets=[1.0])


    CASES = {
        "bad_name": lambda: family("bad name", "d", family.COUNTER),
        "reserved_name": lambda: family("nv_mine", "d", family.GAUGE),
        "bad_kind": lambda: family("errors_kind", "d", 7),
        "other_kind": lambda: counter() and family("errors_counter", "d", family.GAUGE),
        "bad_label": lambda: family("errors_counter", "d", family.COUNTER).Metric(labels={"bad-label": "x"}),
        "counter_buckets": lambda: family("errors_counter", "d", family.COUNTER).Metric(buckets=[1.0]),
        "histogram_without_buckets": lambda: family("errors_histogram", "d", family.HISTOGRAM).Metric(),
        "unsorted_buckets": lambda: family("errors_histogram", "d", family.HISTOGRAM).Metric(buckets=[5.0, 1.0]),
        "labels_not_a_dict": lambda: family("errors_counter", "d", family.COUNTER).Metric(labels=[("k", "v")]),
        "negative_increment": lambda: counter().increment(-1),
        "set_counter": lambda: counter().set(1),
        "observe_counter": lambda: counter().observe(1),
        "histogram_value": lambda: histogram().value(),
    }


    class TritonPythonModel:
        def execute(self, requests):
            messages = {}
            for case, call in CASES.items():
                try:
                    call()
                    messages[case] = None
                except pb_utils.TritonModelException as error:
                    messages[case] = error.message()
            out = pb_utils.Tensor("MESSAGES", np.array([json.dumps(messages)], dtype=np.object_))
            return [pb_utils.InferenceResponse([out]) for _ in requests]
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "MESSAGES" data_type: TYPE_STRING dims: [ 1 ] } ]
    """,
)

READY_PROBE = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                name, version = (
                    pb_utils.get_input_tensor_by_name(request, key).as_numpy()[0].decode()
                    for key in ("NAME", "VERSION")
                )
                ready = pb_utils.is_model_ready(name, version)
                if type(ready) is not bool:
                    raise TypeError(f"is_model_ready returned {type(ready)}")
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("READY", np.array([ready]))]))
            return responses
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [
      { name: "NAME" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "VERSION" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    output [ { name: "READY" data_type: TYPE_BOOL dims: [ 1 ] } ]
    """,
)

MODEL_CONTROLLER = PythonModelSpec(
    model_py="""
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    def load_files(target, request):
        # CONFIG holds {"config": <config JSON>, "files": {"file:<path>": <text>}}
        sent = json.loads(request)
        files = {path: content.encode() for path, content in sent["files"].items()}
        pb_utils.load_model(target, json.dumps(sent["config"]) if sent["config"] else "", files=files)


    ACTIONS = {
        "load": lambda target, config: pb_utils.load_model(target, config),
        "load_named_by_bytes": lambda target, config: pb_utils.load_model(target.encode(), config.encode()),
        "load_files": load_files,
        "unload": lambda target, config: pb_utils.unload_model(target),
        "unload_dependents": lambda target, config: pb_utils.unload_model(target, unload_dependents=True),
    }


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                action, target, config = (
                    pb_utils.get_input_tensor_by_name(request, key).as_numpy()[0].decode()
                    for key in ("ACTION", "TARGET", "CONFIG")
                )
                try:
                    ACTIONS[action](target, config)
                    error = ""
                except pb_utils.TritonModelException as exception:
                    error = exception.message()
                responses.append(
                    pb_utils.InferenceResponse([pb_utils.Tensor("ERROR", np.array([error], dtype=np.object_))])
                )
            return responses
    """,
    config="""
    name: "{name}"
    backend: "python"
    max_batch_size: 0
    input [
      { name: "ACTION" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "TARGET" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "CONFIG" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    output [ { name: "ERROR" data_type: TYPE_STRING dims: [ 1 ] } ]
    """,
)


# Logs a verbose, an info and a warning line naming its MARK input, and returns MARK.
CHATTY = PythonModelSpec(
    model_py="""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mark = int(pb_utils.get_input_tensor_by_name(request, "MARK").as_numpy()[0])
            pb_utils.Logger.log_verbose(f"verbose line {mark}")
            pb_utils.Logger.log_info(f"info line {mark}")
            pb_utils.Logger.log_warn(f"warning line {mark}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mark], np.int32))]))
        return responses
""",
    config="""
name: "{name}"
backend: "python"
max_batch_size: 0
input [ { name: "MARK" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
""",
)
