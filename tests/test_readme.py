"""The README's first commands and snippets work as written against the example repository."""

from __future__ import annotations

import contextlib
import io
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from naiad.testing import ServerProcess, start_server

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)


@pytest.fixture(scope="module")
def example_server() -> Iterator[ServerProcess]:
    server = start_server([ROOT / "examples" / "model_repository"])
    yield server
    server.stop()


def test_readme_starts_with_the_two_setup_commands() -> None:
    first_two = [body.strip() for _, body in BLOCKS[:2]]
    assert first_two[0].startswith("make serve")
    assert first_two[1].startswith("make test")


def test_readme_curl_requests(example_server: ServerProcess) -> None:
    commands = re.findall(r"curl -sN? localhost:8000(\S+) -d\s*'([^']*)'", README)
    assert len(commands) >= 3
    for path, body in commands:
        request = urllib.request.Request(f"http://{example_server.http_url}{path}", data=body.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            body = response.read()
            if path.endswith("generate_stream"):
                events = [json.loads(line[len(b"data: ") :]) for line in body.splitlines() if line]
                assert [event["text_output"] for event in events] == ["the", "quick", "brown", "fox"]
            else:
                assert json.loads(body)["outputs"]


def _run_snippet(snippet: str, server: ServerProcess) -> str:
    code = snippet.replace('"localhost:8000"', f'"{server.http_url}"').replace(
        '"localhost:8001"', f'"{server.grpc_url}"'
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    return printed.getvalue()


def test_readme_tritonclient_snippets(example_server: ServerProcess) -> None:
    snippets = [body for language, body in BLOCKS if language == "python" and "tritonclient" in body]
    assert _run_snippet(snippets[0], example_server).strip() == "[11. 12. 13. 14.] [-9. -8. -7. -6.]"
    assert _run_snippet(snippets[1], example_server).split() == ["the", "quick", "brown", "fox"]


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
