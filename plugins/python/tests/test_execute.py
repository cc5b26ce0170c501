"""The non-decoupled execute contract (python-model-api.md §5) through the real hooks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from naiad.backend import ErrorCode

from .conftest import LoadModel
from .models import (
    ADD_SUB,
    ASYNC_EXECUTE,
    BYTES_IDENTITY,
    ERRORS,
    METADATA,
    NO_EXECUTE,
    SENDER_MODES,
    PythonModelSpec,
)

FOUR = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
ONES = np.ones(4, dtype=np.float32)
# Triton names the instance (<group>_<index>) in this message
FAILED = "Failed to process the request(s) for model '{}', message: "


def test_add_sub(load_model: LoadModel) -> None:
    model = load_model("add_sub", ADD_SUB)
    collected = model.infer({"INPUT0": FOUR, "INPUT1": ONES}, outputs=["OUTPUT0", "OUTPUT1"])
    response = collected.only()
    assert response.error is None
    outputs = {tensor.name: tensor for tensor in response.outputs}
    assert outputs["OUTPUT0"].datatype == "FP32"
    np.testing.assert_array_equal(outputs["OUTPUT0"].data, FOUR + 1)
    np.testing.assert_array_equal(outputs["OUTPUT1"].data, FOUR - 1)


def test_batch_of_requests_each_gets_its_own_response(load_model: LoadModel) -> None:
    model = load_model("add_sub", ADD_SUB)
    pairs = [model.request({"INPUT0": FOUR * i, "INPUT1": ONES}) for i in range(3)]
    model.execute([request for request, _ in pairs])
    for i, (_, collected) in enumerate(pairs):
        np.testing.assert_array_equal(collected.outputs()["OUTPUT0"], FOUR * i + 1)


def test_only_requested_outputs_are_returned(load_model: LoadModel) -> None:
    model = load_model("add_sub", ADD_SUB)
    response = model.infer({"INPUT0": FOUR, "INPUT1": ONES}, outputs=["OUTPUT1"]).only()
    assert [tensor.name for tensor in response.outputs] == ["OUTPUT1"]


def test_no_requested_outputs_means_all_config_outputs(load_model: LoadModel) -> None:
    model = load_model("metadata", METADATA)
    collected = model.infer({"INPUT0": np.zeros((1, 2), np.float32)})
    response = collected.only()
    assert [tensor.name for tensor in response.outputs] == ["INFO", "EXTRA"]  # UNDECLARED dropped
    info = json.loads(collected.outputs()["INFO"][0])
    assert info["requested"] == ["EXTRA", "INFO"]  # sorted from the set the model gets


def test_output_data_is_copied_when_sent(load_model: LoadModel) -> None:
    model = load_model("add_sub", ADD_SUB)
    response = model.infer({"INPUT0": FOUR, "INPUT1": ONES}).only()
    assert all(tensor.data.flags.owndata for tensor in response.outputs)


def test_bytes_identity(load_model: LoadModel) -> None:
    model = load_model("bytes", BYTES_IDENTITY)
    data = np.array([b"hello", b"\x00bin\x00", "wörld".encode()], dtype=np.object_)
    collected = model.infer({"INPUT0": data})
    response = collected.only()
    assert [tensor.datatype for tensor in response.outputs] == ["BYTES", "BYTES"]
    out0 = collected.outputs()["OUTPUT0"]
    assert out0.dtype == np.object_
    assert list(out0) == [b"hello", b"\x00bin\x00", "wörld".encode()]
    assert list(collected.outputs()["OUTPUT1"]) == [b"HELLO", b"\x00BIN\x00", "WÖRLD".encode()]


def test_request_metadata(load_model: LoadModel) -> None:
    model = load_model("metadata", METADATA)
    collected = model.infer(
        {"INPUT0": np.zeros((1, 2), np.float32)},
        outputs=["INFO"],
        id="req-7",
        correlation_id=42,
        flags=1,
        timeout_us=5000,
        parameters={"k": "v\u00e9\u007f", "n": 3},
    )
    response = collected.only()
    assert [tensor.name for tensor in response.outputs] == ["INFO"]
    assert response.parameters == {"answered": True}
    info = json.loads(collected.outputs()["INFO"][0])
    assert info == {
        "request_id": "req-7",
        "correlation_id": 42,
        "flags": 1,
        "timeout": 5000,
        "parameters": {"k": "v\u00e9\u007f", "n": 3},
        "parameters_text": '{"k":"v\u00e9\u007f","n":3}',  # compact JSON, text unescaped, as Triton's
        "requested": ["INFO"],
        "requested_type": "set",  # as Triton's python backend gives it
        "inputs": ["INPUT0"],
        "shape": [1, 2],
        "dtype": 11,
        "cancelled": False,
        "trace": None,
    }


def test_exception_in_execute_fails_every_request(load_model: LoadModel) -> None:
    model = load_model("errors", ERRORS)
    model_file = model.model_dir / "1" / "model.py"
    pairs = [model.request({"INPUT0": FOUR}, parameters={"mode": "raise"}) for _ in range(2)]
    model.execute([request for request, _ in pairs])
    for _, collected in pairs:
        error = collected.only().error
        assert error is not None
        assert error.code is ErrorCode.INTERNAL
        assert error.message == f"{FAILED.format('errors_0')}ValueError: boom\n\nAt:\n  {model_file}(19): execute\n"
    # the instance keeps serving
    np.testing.assert_array_equal(model.infer({"INPUT0": FOUR}).outputs()["OUTPUT0"], FOUR)


def test_system_exit_in_execute_only_fails_the_batch(load_model: LoadModel) -> None:
    model = load_model("errors", ERRORS)
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": "exit"}).only().error
    assert error is not None
    assert error.message.endswith(
        f"message: SystemExit: 3\n\nAt:\n  {model.model_dir / '1' / 'model.py'}(32): execute\n"
    )


@pytest.mark.parametrize(
    ("mode", "described", "line"),
    [("interrupt", "KeyboardInterrupt: <EMPTY MESSAGE>", 34), ("base", "Stop: no more", 36)],
)
def test_a_base_exception_in_execute_only_fails_the_batch(
    load_model: LoadModel, mode: str, described: str, line: int
) -> None:
    """As Triton's stub: any ``BaseException`` model code raises is the batch's error (it took a worker
    process down, or left a thread-isolated instance hanging), and the instance keeps serving."""
    model = load_model("errors", ERRORS)
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": mode}).only().error
    assert error is not None
    assert error.message.endswith(
        f"message: {described}\n\nAt:\n  {model.model_dir / '1' / 'model.py'}({line}): execute\n"
    )
    np.testing.assert_array_equal(model.infer({"INPUT0": FOUR}).outputs()["OUTPUT0"], FOUR)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (
            "short",
            "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            "InferenceRequest(s) size is:2, and InferenceResponse(s) size is:1\n",
        ),
        ("tuple", "Expected a list in the execute return, found type '<class 'tuple'>'."),
        (
            "bad_item",
            "Expected an 'InferenceResponse' object in the execute function return list, found type '<class 'str'>'.",
        ),
    ],
)
def test_contract_violations_fail_the_whole_batch(load_model: LoadModel, mode: str, message: str) -> None:
    model = load_model("errors", ERRORS)
    pairs = [model.request({"INPUT0": FOUR}, parameters={"mode": mode}) for _ in range(2)]
    model.execute([request for request, _ in pairs])
    for _, collected in pairs:
        error = collected.only().error
        assert error is not None
        assert error.code is ErrorCode.INTERNAL
        assert error.message == f"Failed to process the request(s) for model 'errors_0', message: {message}"


def test_missing_execute(load_model: LoadModel) -> None:
    model = load_model("no_execute", NO_EXECUTE)
    error = model.infer({"INPUT0": FOUR}).only().error
    assert error is not None
    assert "does not implement `execute` method." in error.message
    assert str(model.model_dir / "1" / "model.py") in error.message


def test_triton_error_codes_map_to_naiad_codes(load_model: LoadModel) -> None:
    model = load_model("errors", ERRORS)
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": "invalid_arg"}).only().error
    assert error is not None
    assert (error.code, error.message) == (ErrorCode.INVALID_ARG, "INPUT0 must not be empty")
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": "default_code"}).only().error
    assert error is not None
    assert (error.code, error.message) == (ErrorCode.INTERNAL, "plain")


def test_async_execute(load_model: LoadModel) -> None:
    model = load_model("async", ASYNC_EXECUTE)
    np.testing.assert_array_equal(model.infer({"INPUT0": FOUR}).outputs()["OUTPUT0"], FOUR + 1)
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": "raise"}).only().error
    assert error is not None
    # the coroutine's frame only: a finished coroutine's frame has no f_back (as in Triton)
    model_file = model.model_dir / "1" / "model.py"
    assert error.message == f"{FAILED.format('async_0')}KeyError: 'async boom'\n\nAt:\n  {model_file}(11): execute\n"
    # asyncio lets KeyboardInterrupt stop the loop; it fails the batch all the same, and the model serves on
    error = model.infer({"INPUT0": FOUR}, parameters={"mode": "interrupt"}).only().error
    assert error is not None
    assert error.message == f"{FAILED.format('async_0')}KeyboardInterrupt: stop\n\nAt:\n  {model_file}(13): execute\n"
    np.testing.assert_array_equal(model.infer({"INPUT0": FOUR}).outputs()["OUTPUT0"], FOUR + 1)


@pytest.mark.parametrize(
    "mode",
    [
        "send_final_return_none",
        "send_final_return_list_none",
        "send_then_flag",
        "send_without_final",
        "send_after_return",  # from a thread, after execute returned None, as Triton allows
        "send_twice_then_raise",  # the error of the second send does not replace the first response
    ],
)
def test_non_decoupled_response_sender(load_model: LoadModel, mode: str) -> None:
    model = load_model("senders", SENDER_MODES)
    collected = model.infer({"INPUT0": FOUR}, parameters={"mode": mode})
    np.testing.assert_array_equal(collected.outputs()["OUTPUT0"], FOUR)


def test_none_item_without_a_sent_response_is_an_error(load_model: LoadModel) -> None:
    model = load_model("senders", SENDER_MODES)
    ok, ok_collected = model.request({"INPUT0": FOUR}, parameters={"mode": "plain"})
    missing, missing_collected = model.request({"INPUT0": FOUR}, parameters={"mode": "return_none_item"}, id="r2")
    model.execute([ok, missing])
    np.testing.assert_array_equal(ok_collected.outputs()["OUTPUT0"], FOUR)
    error = missing_collected.only().error
    assert error is not None
    assert error.code is ErrorCode.INTERNAL
    assert "sent no response for request 1 of the batch (request id 'r2')" in error.message


def test_returning_a_response_already_sent_fails_the_rest_of_the_batch(load_model: LoadModel) -> None:
    model = load_model("senders", SENDER_MODES)
    sent, sent_collected = model.request({"INPUT0": FOUR}, parameters={"mode": "send_and_return"})
    other, other_collected = model.request({"INPUT0": FOUR}, parameters={"mode": "plain"})
    model.execute([sent, other])
    # the response that went out through the sender stands; the batch fails for the others
    assert sent_collected.only().error is None
    error = other_collected.only().error
    assert error is not None
    assert error.message == (
        "Failed to process the request(s) for model 'senders_0', message: Unable to send response. "
        "Non-decoupled model cannot send more than one response."
    )


def test_sender_rules_in_a_non_decoupled_model(load_model: LoadModel) -> None:
    model = load_model("senders", SENDER_MODES)
    np.testing.assert_array_equal(
        model.infer({"INPUT0": FOUR}, parameters={"mode": "rules"}).outputs()["OUTPUT0"], FOUR
    )
    texts = json.loads((model.model_dir / "1" / "rule_texts.json").read_text())
    assert texts == [
        "Unable to send response. Non-decoupled model cannot send complete final before sending a response.",
        "Unable to send response. Unsupported flag provided.",
        "Inference Response object must be provided when the response flags is set to zero.",
        "Unable to send response. Non-decoupled model cannot send more than one response.",
        "Unable to send response. Response sender has been closed.",
    ]


OPTIONAL_ONLY = PythonModelSpec(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            out = pb_utils.Tensor("OUT", np.zeros((1, 1), np.float32))
            return [pb_utils.InferenceResponse([out]) for _ in requests]
    """,
    """
    backend: "python"
    max_batch_size: 4
    input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] optional: true } ]
    output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
    """,
)


def test_a_batching_model_refuses_a_request_with_no_inputs_as_triton_does(load_model: LoadModel) -> None:
    """Triton's python backend reads a batching model's batch size from each request's first input."""
    model = load_model("optional_only", OPTIONAL_ONLY)
    empty, answered = model.request({}, id="r7")
    full, full_answered = model.request({"A": np.ones((1, 1), np.float32)})
    model.execute([full, empty])  # the whole batch fails, as in Triton
    for collected in (answered, full_answered):
        error = collected.only().error
        assert error is not None
        assert (error.code, error.message) == (
            ErrorCode.INVALID_ARG,
            "[request id: r7] out of bounds index 0: request has 0 inputs",
        )
