"""Where a backend comes from, and what to tell someone whose model names one that is not installed.

naiad's own backends are the distributions under ``plugins/<folder>`` in naiad's source tree; any
other backend is a third party's, installed from wherever its author publishes it. The hints never
name a package to fetch from an index: a name nobody checked could belong to anyone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from naiad.suggestions import close_matches, did_you_mean

PROJECT_PLUGINS: Mapping[str, str] = {
    "fil": "fil",
    "llm": "llm",
    "onnxruntime": "onnxruntime",
    "openvino": "openvino",
    "python": "python",
    "pytorch": "pytorch",
    "tensorrt": "tensorrt",
    "vllm": "llm",
}
"""Backend name -> its folder under ``plugins/`` in naiad's source tree (a test keeps this in step)."""

_FROM_SOURCE = "install it from a checkout of naiad's source with `pip install ./plugins/{folder}`"
_ELSEWHERE = (
    "Backends that come with naiad are the distributions under plugins/<name> in its source tree "
    "(`pip install ./plugins/<name>` from a checkout); any other backend comes from its author."
)


def missing_backend_hint(
    name: str, installed: Iterable[str], platforms: Mapping[str, str]
) -> tuple[str, tuple[str, ...]]:
    """What to do about backend ``name`` that no installed distribution provides, and the backends it may mean.

    ``platforms`` maps every known platform value to its backend: a platform given as the backend
    suggests that backend; a name none of the installed, naiad's own and Triton's backends has, those
    spelled alike.
    """
    sentences: list[str] = []
    if name in platforms:
        suggestions: tuple[str, ...] = (platforms[name],)
        sentences.append(f'\'{name}\' is a platform: set platform: "{name}", or backend: "{platforms[name]}".')
    else:
        known = {*installed, *PROJECT_PLUGINS, *platforms.values()}
        suggestions = () if name in known else close_matches(name, known)
        if suggestions:
            guess = did_you_mean(suggestions)
            sentences.append(guess[0].upper() + guess[1:])
    names = sorted(set(installed))
    sentences.append(f"Installed backends: {', '.join(names) if names else 'none'}.")
    if name in PROJECT_PLUGINS:
        folder = PROJECT_PLUGINS[name]
        sentences.append(f"'{name}' is one of naiad's own backends: {_FROM_SOURCE.format(folder=folder)}.")
    else:
        sentences.append(_ELSEWHERE)
    return " ".join(sentences), suggestions


def reinstall_hint(name: str, distribution: str) -> str:
    """What to do about backend ``name`` whose distribution is installed but broken."""
    if name in PROJECT_PLUGINS:
        return f"reinstall it from a checkout of naiad's source with `pip install ./plugins/{PROJECT_PLUGINS[name]}`"
    return f"reinstall the distribution '{distribution}' the way it was installed, or ask its author"
