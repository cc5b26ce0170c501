"""Python models that call other models through BLS (``pb_utils.InferenceRequest.exec`` / ``async_exec``).

They are plain Triton models; ``test_bls.py`` serves them next to the callees in ``models.py``
(``add_sub`` and the decoupled ``repeat``) and the ones here (``sleeper``, ``address``, ``raises``).
"""

from __future__ import annotations

from .models import PythonModelSpec


def _config(inputs: str, outputs: str, extra: str = "") -> str:
    return f"""
    name: "{{name}}"
    backend: "python"
    max_batch_size: 0
    input [ {inputs} ]
    output [ {outputs} ]
    {extra}
    """


_ADD_SUB_IO = (
    '{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }',
    '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }',
)

# -- callees -----------------------------------------------------------------------------------

SLEEPER = PythonModelSpec(
    model_py="""
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                ms = int(pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()[0])
                deadline = time.monotonic() + ms / 1000
                while time.monotonic() < deadline and not request.is_cancelled():
                    time.sleep(0.005)
                if request.is_cancelled():
                    error = pb_utils.TritonError("sleep cancelled", pb_utils.TritonError.CANCELLED)
                    responses.append(pb_utils.InferenceResponse(error=error))
                else:
                    responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SLEPT", np.array([ms], np.int32))]))
            return responses
    """,
    config=_config(
        '{ name: "MS" data_type: TYPE_INT32 dims: [ 1 ] }',
        '{ name: "SLEPT" data_type: TYPE_INT32 dims: [ 1 ] }',
        "instance_group [ { kind: KIND_CPU count: 2 } ]",
    ),
)

ADDRESS = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            return [
                pb_utils.InferenceResponse([
                    pb_utils.Tensor(
                        "ADDRESS",
                        np.array([pb_utils.get_input_tensor_by_name(r, "DATA").as_numpy().ctypes.data], np.int64),
                    )
                ])
                for r in requests
            ]
    """,
    config=_config(
        '{ name: "DATA" data_type: TYPE_FP32 dims: [ -1 ] }', '{ name: "ADDRESS" data_type: TYPE_INT64 dims: [ 1 ] }'
    ),
)

REQUEST_ECHO = PythonModelSpec(
    model_py="""
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for r in requests:
                seen = {
                    "correlation_id": r.correlation_id(),
                    "flags": r.flags(),
                    "timeout": r.timeout(),
                    "parameters": json.loads(r.parameters()),
                }
                seen_tensor = pb_utils.Tensor("SEEN", np.array([json.dumps(seen)], np.object_))
                responses.append(pb_utils.InferenceResponse([seen_tensor]))
            return responses
    """,
    config=_config(
        '{ name: "DATA" data_type: TYPE_FP32 dims: [ -1 ] }', '{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }'
    ),
)

RAISES = PythonModelSpec(
    model_py="""
    class TritonPythonModel:
        def execute(self, requests):
            raise ValueError("cannot handle this input")
    """,
    config=_config(
        '{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }', '{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }'
    ),
)

REJECTS = PythonModelSpec(
    model_py="""
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            error = pb_utils.TritonError("no such item", pb_utils.TritonError.NOT_FOUND)
            return [pb_utils.InferenceResponse(error=error) for _ in requests]
    """,
    config=_config(
        '{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }', '{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }'
    ),
)

# -- callers -----------------------------------------------------------------------------------

CALL_ADD_SUB = PythonModelSpec(
    model_py="""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                bls = pb_utils.InferenceRequest(
                    model_name="add_sub", inputs=request.inputs(), requested_output_names=["OUTPUT0", "OUTPUT1"]
                )
                response = bls.exec()
                if response.has_error():
                    responses.append(pb_utils.InferenceResponse(error=response.error()))
                else:
                    responses.append(pb_utils.InferenceResponse(response.output_tensors()))
            return responses
    """,
    config=_config(*_ADD_SUB_IO),
)

GATHER_SLEEPS = PythonModelSpec(
    model_py="""
    import asyncio
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            responses = []
            for request in requests:
                ms = pb_utils.get_input_tensor_by_name(request, "MS")
                started = time.monotonic()
                results = await asyncio.gather(*[
                    pb_utils.InferenceRequest(
                        model_name="sleeper", inputs=[ms], requested_output_names=["SLEPT"]
                    ).async_exec()
                    for _ in range(2)
                ])
                elapsed = time.monotonic() - started
                slept = np.concatenate([r.output_tensors()[0].as_numpy() for r in results])
                responses.append(
                    pb_utils.InferenceResponse([
                        pb_utils.Tensor("SLEPT", slept),
                        pb_utils.Tensor("ELAPSED", np.array([elapsed], np.float64)),
                    ])
                )
            return responses
    """,
    config=_config(
        '{ name: "MS" data_type: TYPE_INT32 dims: [ 1 ] }',
        '{ name: "SLEPT" data_type: TYPE_INT32 dims: [ 2 ] }, { name: "ELAPSED" data_type: TYPE_FP64 dims: [ 1 ] }',
    ),
)

_REPEAT_IO = (
    '{ name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }',
    '{ name: "VALUES" data_type: TYPE_INT32 dims: [ -1 ] }, { name: "COUNTS" data_type: TYPE_INT32 dims: [ 3 ] }',
)

# COUNTS: responses iterated, responses when iterated again, whether the last one was empty.
CALL_REPEAT = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                bls = pb_utils.InferenceRequest(
                    model_name="repeat",
                    inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                    requested_output_names=["OUT"],
                )
                iterator = bls.exec(decoupled=True)
                values, count, last_empty = [], 0, False
                for response in iterator:
                    if response.has_error():
                        raise pb_utils.TritonModelException(response.error().message())
                    count += 1
                    last_empty = not response.output_tensors()
                    if not last_empty:
                        values.append(int(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0]))
                replayed = sum(1 for _ in iterator)
                responses.append(
                    pb_utils.InferenceResponse([
                        pb_utils.Tensor("VALUES", np.array(values, np.int32)),
                        pb_utils.Tensor("COUNTS", np.array([count, replayed, last_empty], np.int32)),
                    ])
                )
            return responses
    """,
    config=_config(*_REPEAT_IO),
)

CALL_REPEAT_ASYNC = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        async def execute(self, requests):
            responses = []
            for request in requests:
                bls = pb_utils.InferenceRequest(
                    model_name="repeat",
                    inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                    requested_output_names=["OUT"],
                )
                iterator = await bls.async_exec(decoupled=True)
                values, count, last_empty = [], 0, False
                async for response in iterator:
                    count += 1
                    last_empty = not response.output_tensors()
                    if not last_empty:
                        values.append(int(response.output_tensors()[0].as_numpy()[0]))
                replayed = sum(1 for _ in iterator)
                responses.append(
                    pb_utils.InferenceResponse([
                        pb_utils.Tensor("VALUES", np.array(values, np.int32)),
                        pb_utils.Tensor("COUNTS", np.array([count, replayed, last_empty], np.int32)),
                    ])
                )
            return responses
    """,
    config=_config(*_REPEAT_IO),
)

# CASE names a BLS call; the model answers with the error it got back ("no error" when none), its code
# and how many responses came. "init" reports what a BLS call in initialize() raised.
BLS_ERRORS = PythonModelSpec(
    model_py="""
    import asyncio

    import numpy as np
    import triton_python_backend_utils as pb_utils

    ADD_SUB_IN = pb_utils.Tensor("INPUT0", np.ones(4, np.float32))
    SLEEP = pb_utils.Tensor("MS", np.array([300], np.int32))


    def request(model, inputs, outputs, **options):
        return pb_utils.InferenceRequest(model_name=model, inputs=inputs, requested_output_names=outputs, **options)


    def named_by_bytes():
        second = pb_utils.Tensor(b"INPUT1", np.ones(4, np.float32))
        return [request(b"add_sub", [ADD_SUB_IN, second], [b"OUTPUT0"], request_id=b"r").exec()]


    def refused_then_served():
        try:
            request("add_sub", [ADD_SUB_IN], [5])
        except TypeError:
            pass
        second = pb_utils.Tensor("INPUT1", np.ones(4, np.float32))
        return [request("add_sub", [ADD_SUB_IN, second], ["OUTPUT0"]).exec()]


    async def given_up_async():
        long_sleep = pb_utils.Tensor("MS", np.array([3000], np.int32))
        try:
            return await asyncio.wait_for(request("sleeper", [long_sleep], ["SLEPT"]).async_exec(), 0.1)
        except TimeoutError:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError("gave up"))


    async def timed_out_async():
        return await request("sleeper", [SLEEP], ["SLEPT"], timeout=50_000).async_exec()


    CASES = {
        "unknown": lambda: [request("missing", [], []).exec()],
        "unknown_decoupled": lambda: list(request("missing", [], []).exec(decoupled=True)),
        "bad_input": lambda: [request("add_sub", [ADD_SUB_IN], ["OUTPUT0"]).exec()],
        "duplicate_input": lambda: [request("add_sub", [ADD_SUB_IN, ADD_SUB_IN], ["OUTPUT0"]).exec()],
        "raises": lambda: [request("raises", [pb_utils.Tensor("X", np.ones(2, np.float32))], ["Y"]).exec()],
        "rejects": lambda: [request("rejects", [pb_utils.Tensor("X", np.ones(2, np.float32))], ["Y"]).exec()],
        "decoupled": lambda: [request("repeat", [pb_utils.Tensor("IN", np.ones(2, np.int32))], ["OUT"]).exec()],
        "self": lambda: [request("bls_errors", [], []).exec()],
        "timeout": lambda: [request("sleeper", [SLEEP], ["SLEPT"], timeout=50_000).exec()],
        "timeout_async": lambda: [asyncio.run(timed_out_async())],
        "given_up": lambda: [asyncio.run(given_up_async())],
        "named_by_bytes": named_by_bytes,
        "refused_then_served": refused_then_served,
    }


    class TritonPythonModel:
        def initialize(self, args):
            try:
                request("add_sub", [ADD_SUB_IN], ["OUTPUT0"]).exec()
                self.init_error = "no error"
            except pb_utils.TritonModelException as error:
                self.init_error = str(error)

        def execute(self, requests):
            responses = []
            for request_ in requests:
                case = pb_utils.get_input_tensor_by_name(request_, "CASE").as_numpy()[0].decode()
                if case == "init":
                    message, code, count = self.init_error, "", 0
                else:
                    results = CASES[case]()
                    error = results[0].error()
                    message, code = ("no error", "") if error is None else (error.message(), error.code().name)
                    count = len(results)
                responses.append(
                    pb_utils.InferenceResponse([
                        pb_utils.Tensor("ERROR", np.array([message.encode()], np.object_)),
                        pb_utils.Tensor("CODE", np.array([code.encode()], np.object_)),
                        pb_utils.Tensor("COUNT", np.array([count], np.int32)),
                    ])
                )
            return responses
    """,
    config=_config(
        '{ name: "CASE" data_type: TYPE_STRING dims: [ 1 ] }',
        '{ name: "ERROR" data_type: TYPE_STRING dims: [ 1 ] }, { name: "CODE" data_type: TYPE_STRING dims: [ 1 ] }, '
        '{ name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] }',
    ),
)

CALL_SLEEPER = PythonModelSpec(
    model_py="""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                bls = pb_utils.InferenceRequest(
                    model_name="sleeper", inputs=request.inputs(), requested_output_names=["SLEPT"]
                )
                response = bls.exec()
                responses.append(pb_utils.InferenceResponse(response.output_tensors(), error=response.error()))
            return responses
    """,
    config=_config(
        '{ name: "MS" data_type: TYPE_INT32 dims: [ 1 ] }', '{ name: "SLEPT" data_type: TYPE_INT32 dims: [ 1 ] }'
    ),
)


CALL_REQUEST_ECHO = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                bls = pb_utils.InferenceRequest(
                    model_name="request_echo",
                    inputs=[pb_utils.Tensor("DATA", np.ones(2, np.float32))],
                    requested_output_names=["SEEN"],
                    correlation_id=42,
                    flags=pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
                    timeout=123,
                    parameters={
                        "priority": 1, "timeout": 5, "sequence_id": 7, "sequence_end": True,
                        "binary_data_output": True, "triton_x": 1, "k": "v",
                    },
                )
                response = bls.exec()
                responses.append(pb_utils.InferenceResponse(response.output_tensors(), error=response.error()))
            return responses
    """,
    config=_config(
        '{ name: "DATA" data_type: TYPE_FP32 dims: [ -1 ] }', '{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }'
    ),
)


def relay(next_model: str) -> PythonModelSpec:
    """Sends X on to ``next_model`` and answers with what it answered (its error included)."""
    return PythonModelSpec(
        model_py="""
        import json

        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def initialize(self, args):
                self.next = json.loads(args["model_config"])["parameters"]["NEXT"]["string_value"]

            def execute(self, requests):
                responses = []
                for request in requests:
                    bls = pb_utils.InferenceRequest(
                        model_name=self.next, inputs=request.inputs(), requested_output_names=["Y"]
                    )
                    response = bls.exec()
                    responses.append(pb_utils.InferenceResponse(response.output_tensors(), error=response.error()))
                return responses
        """,
        config=_config(
            '{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }',
            '{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }',
            f'parameters {{ key: "NEXT" value: {{ string_value: "{next_model}" }} }}',
        ),
    )


# OUTPUT0 is add_sub's own output tensor passed on; ADDRESSES: where its data is in this model and
# where the model "address" found it when the tensor was passed to it as a BLS input.
ZERO_COPY = PythonModelSpec(
    model_py="""
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                sums = pb_utils.InferenceRequest(
                    model_name="add_sub", inputs=request.inputs(), requested_output_names=["OUTPUT0", "OUTPUT1"]
                ).exec()
                total = pb_utils.get_output_tensor_by_name(sums, "OUTPUT0")
                seen = pb_utils.InferenceRequest(
                    model_name="address",
                    inputs=[pb_utils.Tensor("DATA", total.as_numpy())],
                    requested_output_names=["ADDRESS"],
                ).exec()
                addresses = [total.as_numpy().ctypes.data, seen.output_tensors()[0].as_numpy()[0]]
                responses.append(
                    pb_utils.InferenceResponse([
                        total,
                        pb_utils.get_output_tensor_by_name(sums, "OUTPUT1"),
                        pb_utils.Tensor("ADDRESSES", np.array(addresses, np.int64)),
                    ])
                )
            return responses
    """,
    config=_config(_ADD_SUB_IO[0], _ADD_SUB_IO[1] + ', { name: "ADDRESSES" data_type: TYPE_INT64 dims: [ 2 ] }'),
)

# Waits 300 ms before calling add_sub: long enough for the server to begin shutting down meanwhile.
LATE_CALLER = PythonModelSpec(
    model_py="""
    import time

    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            time.sleep(0.3)
            responses = []
            for request in requests:
                response = pb_utils.InferenceRequest(
                    model_name="add_sub", inputs=request.inputs(), requested_output_names=["OUTPUT0"]
                ).exec()
                responses.append(pb_utils.InferenceResponse(response.output_tensors(), error=response.error()))
            return responses
    """,
    config=_config(_ADD_SUB_IO[0], '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }'),
)
