"""Control tensors and implicit state as the sequence batcher builds them for a request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format

from naiad import datatypes
from naiad.backend import (
    SEQUENCE_END,
    SEQUENCE_START,
    InferenceRequest,
    InferenceResponse,
    RequestedOutput,
    ResponseSender,
    Tensor,
)
from naiad.errors import NaiadError
from naiad.pipeline import build_pipeline
from naiad.protocol.model_config_pb2 import ModelConfig
from naiad.scheduling.sequence_controls import controls_from_config, corrid_array
from naiad.scheduling.sequence_state import ImplicitState, states_from_config
from naiad.scheduling.sequence_table import SlotKey

CONTROLS = """
    name: "m"
    max_batch_size: {mbs}
    sequence_batching {{ control_input [
      {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
      {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ -1, 2.5 ] }} ] }},
      {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
      {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
    ] }}
"""


def config(text: str) -> ModelConfig:
    return text_format.Parse(text, ModelConfig())


def values(tensors: list[Tensor]) -> dict[str, tuple[str, tuple[int, ...], Any]]:
    return {t.name: (t.datatype, t.shape, t.data.flatten()[0]) for t in tensors}


def test_controls_carry_the_configured_types_values_and_batch_shape() -> None:
    controls = controls_from_config(config(CONTROLS.format(mbs=4, corrid="TYPE_UINT64")))
    tensors = controls.tensors(SEQUENCE_START, 1001, ["INPUT"])
    assert values(tensors) == {
        "CORRID": ("UINT64", (1, 1), 1001),
        "READY": ("BOOL", (1, 1), True),
        "END": ("FP32", (1, 1), -1.0),
        "START": ("INT32", (1, 1), 1),
    }
    assert values(controls.tensors(SEQUENCE_END, 5, ["INPUT"]))["END"][2] == 2.5
    padding = values(controls.tensors(SEQUENCE_START | SEQUENCE_END, 5, ["INPUT"], ready=False))
    assert [padding[name][2] for name in ("CORRID", "READY", "END", "START")] == [0, False, -1.0, 0]


@pytest.mark.parametrize(
    ("names", "inputs", "order"),
    [
        ({"START": "START", "END": "END", "READY": "READY", "CORRID": "CORRID"}, ["INPUT"], "READY CORRID END START"),
        (
            {"START": "START", "END": "END", "READY": "READY", "CORRID": "CORRID"},
            ["X", "INPUT0"],
            "READY CORRID END START",
        ),
        ({"START": "xx", "READY": "yy", "CORRID": "zz"}, ["INPUT"], "zz xx yy"),
        (
            {"START": "c_start", "END": "b_end", "READY": "d_ready", "CORRID": "a_corrid"},
            ["INPUT"],
            "a_corrid d_ready b_end c_start",
        ),
        ({"START": "START", "END": "END", "READY": "READY"}, ["INPUT"], "READY END START"),
    ],
)
def test_controls_come_in_the_order_tritons_python_backend_lists_them(
    names: dict[str, str], inputs: list[str], order: str
) -> None:
    """Orders seen from a Triton 2.51 python model's ``request.inputs()`` (controls first, then the client's inputs)."""
    kinds = {
        "START": "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ]",
        "END": "CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ]",
        "READY": "CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ]",
        "CORRID": "CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64",
    }
    declared = ", ".join(f'{{ name: "{name}" control [ {{ kind: {kinds[kind]} }} ] }}' for kind, name in names.items())
    controls = controls_from_config(config(f"sequence_batching {{ control_input [ {declared} ] }}"))
    assert " ".join(tensor.name for tensor in controls.tensors(SEQUENCE_START, 7, inputs)) == order


def test_non_batching_models_get_shape_one() -> None:
    controls = controls_from_config(config(CONTROLS.format(mbs=0, corrid="TYPE_INT32")))
    assert {t.shape for t in controls.tensors(0, 3, ["INPUT"])} == {(1,)}


@pytest.mark.parametrize(
    ("correlation_id", "datatype", "expected"),
    [
        (2**40 + 5, "INT32", 5),  # truncated to the datatype's width
        (2**64 - 1, "INT64", -1),
        ("x", "UINT64", 0x78_0000_0001),  # Triton copies a 4-byte length, then the string
        ("s1", "INT32", 2),
        ("hello", "BYTES", b"hello"),
        (0, "BYTES", b""),
    ],
)
def test_corrid_values_match_what_triton_writes(correlation_id: int | str, datatype: str, expected: object) -> None:
    array = corrid_array(correlation_id, datatypes.BY_WIRE[datatype], (1, 1))
    assert array.shape == (1, 1)
    assert array[0, 0] == expected


def test_integer_ids_are_refused_by_a_string_corrid() -> None:
    controls = controls_from_config(config(CONTROLS.format(mbs=2, corrid="TYPE_STRING")))
    controls.check_id("abc")
    with pytest.raises(NaiadError) as error:
        controls.check_id(42)
    assert error.value.message == "unexpected number of string elements 2 for inference input 'CORRID', expecting 1"


STATE = """
    name: "m"
    max_batch_size: 2
    output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
    sequence_batching {{ state [ {{ input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 2 ]
      {initial} }} ] }}
"""


def request(flags: int, sink: list[InferenceResponse], state: ImplicitState) -> InferenceRequest:
    """A request whose responses pass the implicit-state pipeline stage into ``sink``."""
    return InferenceRequest(
        model_name="m",
        model_version=1,
        inputs={},
        requested_outputs={"OUT": RequestedOutput("OUT")},
        sender=ResponseSender(
            lambda event: sink.append(event.response) if event.response else None, build_pipeline([state])
        ),
        correlation_id=9,
        flags=flags,
    )


def test_state_starts_initial_then_follows_the_state_output_hidden_from_the_client() -> None:
    initial = 'initial_state { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true name: "zeros" }'
    state = ImplicitState(states_from_config(config(STATE.format(initial=initial))))
    slot = SlotKey(0, 0)
    sink: list[InferenceResponse] = []
    first = request(SEQUENCE_START, sink, state)
    (tensor,) = state.inputs_for(slot, first)
    assert (tensor.name, tensor.shape, tensor.data.tolist()) == ("S_IN", (1, 2), [[0.0, 0.0]])
    assert list(first.requested_outputs) == ["OUT", "S_OUT"]
    new_state = np.array([[1.0, 2.0]], dtype=np.float32)
    first.sender.send(
        InferenceResponse([Tensor("OUT", "FP32", new_state), Tensor("S_OUT", "FP32", new_state)]), final=True
    )
    assert [t.name for t in sink[0].outputs] == ["OUT"]
    second = request(0, sink, state)
    assert state.inputs_for(slot, second)[0].data.tolist() == [[1.0, 2.0]]
    assert state.inputs_for(slot, request(SEQUENCE_START, sink, state))[0].data.tolist() == [[0.0, 0.0]]
    assert state.null_inputs()[0].data.tolist() == [[0.0, 0.0]]


def test_state_output_stays_visible_when_the_client_asked_for_it() -> None:
    state = ImplicitState(states_from_config(config(STATE.format(initial=""))))
    sink: list[InferenceResponse] = []
    asked = request(SEQUENCE_START, sink, state)
    asked.requested_outputs = {"S_OUT": RequestedOutput("S_OUT")}
    state.inputs_for(SlotKey(0, 1), asked)
    asked.sender.send(InferenceResponse([Tensor("S_OUT", "FP32", np.ones((1, 2), np.float32))]), final=True)
    assert [t.name for t in sink[0].outputs] == ["S_OUT"]


def test_initial_state_from_a_data_file(tmp_path: Path) -> None:
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "init.bin").write_bytes(np.array([3.0, 4.0], dtype=np.float32).tobytes())
    initial = 'initial_state { data_type: TYPE_FP32 dims: [ 2 ] data_file: "init.bin" name: "file" }'
    (spec,) = states_from_config(config(STATE.format(initial=initial)), tmp_path)
    assert spec.initial.tolist() == [[3.0, 4.0]]
    (tmp_path / "initial_state" / "init.bin").write_bytes(b"\0" * 4)
    with pytest.raises(NaiadError) as error:
        states_from_config(config(STATE.format(initial=initial)), tmp_path)
    assert error.value.message == (
        "initial_state setting expects 8 bytes, but the data provided from init.binonly has 4 bytes."
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\x02\0\0\0hi\x01\0\0\0a", [[b"hi", b"a"]]),
        (b"\x02\0\0\0hi", [[b"hi", b""]]),
        (b"d\0\0\0", [[b"", b""]]),  # Triton's L0_sequence_batcher file: declares 100 bytes, holds none
        (b"", [[b"", b""]]),
    ],
    ids=["whole", "short", "truncated", "empty"],
)
def test_a_string_initial_state_file_is_read_as_triton_copies_it(
    tmp_path: Path, raw: bytes, expected: list[list[bytes]]
) -> None:
    """Triton copies the file into the state unchecked; the model sees the elements that fit."""
    (tmp_path / "initial_state").mkdir()
    (tmp_path / "initial_state" / "init.bin").write_bytes(raw)
    initial = 'initial_state { data_type: TYPE_STRING dims: [ 2 ] data_file: "init.bin" name: "file" }'
    strings = STATE.format(initial=initial).replace("TYPE_FP32", "TYPE_STRING")
    (spec,) = states_from_config(config(strings), tmp_path)
    assert spec.initial.tolist() == expected


@pytest.mark.parametrize(
    ("initial", "text"),
    [
        (
            'initial_state { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true name: "z" }',
            "The data type used for 'initial_state' field of state 'S_IN' does not match the state data type.",
        ),
        (
            "initial_state { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true }",
            "Field 'name' must be set when using initial_state for state input 'S_IN'.",
        ),
        (
            'initial_state { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true name: "z" }',
            "'initial_state' dim for input name 'S_IN' doesn't match 'state' dim description. 3 != 2",
        ),
    ],
)
def test_initial_state_errors_use_tritons_texts(initial: str, text: str) -> None:
    with pytest.raises(NaiadError) as error:
        states_from_config(config(STATE.format(initial=initial)))
    assert error.value.message == text
