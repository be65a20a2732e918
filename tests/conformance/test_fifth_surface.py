"""The fifth surface (``tests/conformance/fifth``) is only a surface: it imports the shared
pieces and nothing of another surface or of ``bot``; its renderer keeps any text within
the platform's bounds; its fake platform refuses what it must."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from adapters.live import RunView, StepView
from tests.conformance.fifth.platform import MESSAGE_CHARS, Platform, Refused
from tests.conformance.fifth.render import PlainRenderer

FIFTH = Path(__file__).parent / "fifth"
SHARED = (
    "adapters.dispatch",
    "adapters.live",
    "adapters.words",
    "adapters.policy",
    "adapters.pacing",
    "adapters.recovery",
    "adapters.room",
    "adapters.channels",
    "adapters.attachments",
    "core",
    "tests.conformance.fifth",
)
"""What a new surface may build on; never ``adapters.web`` and its siblings, nor ``bot``."""


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def strays(paths: list[Path]) -> list[str]:
    """Imports of the project's own modules that are not shared pieces."""
    return [
        f"{path.name}: {name}"
        for path in paths
        for name in imported(path)
        if name.split(".")[0] in {"adapters", "core", "tests", "bot"}
        and name != "adapters"
        and not any(name == s or name.startswith(s + ".") for s in SHARED)
    ]


def test_the_fifth_surface_touches_only_shared_pieces() -> None:
    assert strays(sorted(FIFTH.glob("*.py"))) == []


def test_the_check_sees_a_stray(tmp_path: Path) -> None:
    """The walk above finds another surface's import (so its empty list means something)."""
    stray = tmp_path / "stray.py"
    stray.write_text("from adapters.web.render import clean\nimport bot.app\nfrom core import x\n")
    assert sorted(strays([stray])) == ["stray.py: adapters.web.render", "stray.py: bot.app"]


long_text = st.text(min_size=0, max_size=12_000)


@given(answer=long_text, thought=long_text, observation=long_text, who=long_text)
def test_any_text_renders_within_the_platforms_bounds(
    answer: str, thought: str, observation: str, who: str
) -> None:
    view = RunView(question="q", answer=answer, phase="answered")
    view.steps.append(StepView(1, thought=thought, action="x" * 500, observation=observation))
    renderer = PlainRenderer("run")
    stopped = RunView(question="q", phase="cancelled", stopped_by=who)
    for post in (renderer.live(view), renderer.final(view), renderer.final(stopped)):
        assert 0 < len(post.text) <= MESSAGE_CHARS
        Platform().post("c", "bot", post.text)  # the platform takes it
    assert renderer.final(stopped).text.startswith("⏹️ " + words.stopped(None, 0)[:7])


def test_the_platform_refuses_what_a_real_one_would() -> None:
    chat = Platform()
    with pytest.raises(Refused):
        chat.post("c", "ada", "x" * (MESSAGE_CHARS + 1))
    mine = chat.post("c", "ada", "hello")
    with pytest.raises(Refused):
        chat.edit(mine.id, "changed", ())  # not the bot's
    with pytest.raises(Refused):
        chat.button(mine.id, "stop")  # no such button
