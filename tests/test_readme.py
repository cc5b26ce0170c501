"""The README's first commands and snippets work as written against the example repository."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from naiad.testing import ServerProcess, start_server

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
CURL = re.compile(r"curl -sN? localhost:8000(\S+) -d\s*'([^']*)'\n((?:# .*\n)*)")
STREAMING = next(body for language, body in BLOCKS if language == "python" and "start_stream" in body)


@pytest.fixture(scope="module")
def example_server() -> Iterator[ServerProcess]:
    server = start_server([ROOT / "examples" / "model_repository"])
    yield server
    server.stop()


def test_readme_starts_with_the_two_setup_commands() -> None:
    first_two = [body.strip() for _, body in BLOCKS[:2]]
    assert first_two[0].startswith("make serve")
    assert first_two[1].startswith("make test")


def test_readme_commands_copy_from_the_raw_file() -> None:
    """curl commands sit in code blocks, and no command in running text wraps: copied, it would fail."""
    prose = re.sub(r"```.*?```", "", README, flags=re.DOTALL)
    spans = re.findall(r"`([^`]+)`", prose)
    assert [span for span in spans if "curl " in span] == []
    assert [span for span in spans if "\n" in span and span.split()[0] in {"naiad", "make", "python", "pip"}] == []


def test_readme_curl_requests(example_server: ServerProcess) -> None:
    commands = [command for language, body in BLOCKS if language == "bash" for command in CURL.findall(body)]
    assert [path for path, _, _ in commands] == [
        "/v2/models/add_sub/infer",
        "/v2/models/string_reverse/infer",
        "/v2/models/word_stream/generate_stream",
    ]
    for path, body, printed in commands:
        request = urllib.request.Request(f"http://{example_server.http_url}{path}", data=body.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            answer = response.read()
        if path.endswith("generate_stream"):
            events = [json.loads(line[len(b"data: ") :]) for line in answer.splitlines() if line]
            assert [event["text_output"] for event in events] == ["the", "quick", "brown", "fox"]
        elif printed.endswith("...\n"):  # the start of the answer
            assert answer.decode().startswith(printed[2:-4])
        else:  # the whole answer
            assert json.loads(answer) == json.loads(printed[2:])


def _run_snippet(snippet: str, server: ServerProcess) -> str:
    code = snippet.replace('"localhost:8000"', f'"{server.http_url}"').replace(
        '"localhost:8001"', f'"{server.grpc_url}"'
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    return printed.getvalue()


def test_readme_tritonclient_snippet(example_server: ServerProcess) -> None:
    snippet = next(body for language, body in BLOCKS if language == "python" and "tritonclient.http" in body)
    assert _run_snippet(snippet, example_server).strip() == "[11. 12. 13. 14.] [-9. -8. -7. -6.]"


def _run_snippet_in_python(snippet: str, server: ServerProcess) -> subprocess.CompletedProcess[str]:
    """Run ``snippet`` as a program against ``server``; one that hangs fails the test after 60 s."""
    code = snippet.replace('"localhost:8001"', f'"{server.grpc_url}"')
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_readme_streaming_snippet(example_server: ServerProcess) -> None:
    ran = _run_snippet_in_python(STREAMING, example_server)
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout.split() == ["the", "quick", "brown", "fox"]


def test_readme_streaming_snippet_prints_the_servers_error_and_ends(example_server: ServerProcess) -> None:
    call = 'client.async_stream_infer("word_stream",'
    assert STREAMING.count(call) == 1
    ran = _run_snippet_in_python(STREAMING.replace(call, 'client.async_stream_infer("word_strem",'), example_server)
    assert (ran.returncode, ran.stderr) == (0, "")
    assert ran.stdout == "Request for unknown model: 'word_strem' is not found\n"


def test_readme_chat_completion(tmp_path: Path) -> None:
    from naiad_llm.testing import build_tiny_model, write_model_repository

    model_dir = write_model_repository(tmp_path / "models", "llm_tiny", "tiny-llama")
    build_tiny_model(model_dir / "1" / "tiny-llama")
    snippet = next(body for language, body in BLOCKS if language == "python" and "chat.completions" in body)
    server = start_server([tmp_path / "models"], timeout=120)
    try:
        code = snippet.replace("http://localhost:8000/v1", f"http://{server.http_url}/v1")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        server.stop()
    assert printed.getvalue().split() == ["length", "8"]
