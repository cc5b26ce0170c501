import pytest

from naiad.backend import ErrorCode, NaiadError
from naiad_llm.sampling import parse_sampling, parse_sampling_json


def test_triton_clients_send_numbers_as_strings() -> None:
    settings, lora = parse_sampling_json(
        '{"temperature": "0.5", "top_p": "0.9", "max_tokens": "7", "top_k": -1, "ignore_eos": "true", "stop": "x"}'
    )
    assert (settings.temperature, settings.top_p, settings.max_tokens, settings.top_k) == (0.5, 0.9, 7, 0)
    assert settings.ignore_eos
    assert settings.stop == ("x",)
    assert lora is None


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ('{"temperature": -1}', "temperature"),
        ('{"top_p": 0}', "top_p"),
        ('{"top_k": -2}', "top_k"),
        ('{"min_p": 2}', "min_p"),
        ('{"max_tokens": 0}', "max_tokens"),
        ('{"repetition_penalty": 0}', "repetition_penalty"),
        ('{"presence_penalty": 2.5}', "presence_penalty"),
        ('{"frequency_penalty": -3}', "frequency_penalty"),
        ('{"seed": "abc"}', "seed"),
        ('{"stop": 3}', "stop"),
        ('{"stop_token_ids": [-1]}', "stop_token_ids"),
        ('{"n": 0}', "n"),
        ('{"best_of": 2}', "best_of"),
        ('{"min_tokens": -1}', "min_tokens"),
        ('{"min_tokens": 5, "max_tokens": 4}', "min_tokens"),
    ],
)
def test_invalid_values_name_the_field(document: str, field: str) -> None:
    with pytest.raises(NaiadError) as raised:
        parse_sampling_json(document)
    assert raised.value.code is ErrorCode.INVALID_ARG
    assert f"'{field}'" in str(raised.value)


def test_request_parameters_ignore_names_that_are_not_sampling_settings() -> None:
    settings, _ = parse_sampling({"max_tokens": 3, "triton_enable_empty_final_response": True}, strict=False)
    assert settings.max_tokens == 3
