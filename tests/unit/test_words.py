"""One set of words (issue 41): the sentences about presses and commands live in
``adapters.words``, and no surface writes its own copy."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from adapters import words
from core.tools import ToolDisplay

ROOT = Path(__file__).resolve().parents[2]
SURFACES = ("discord", "slack", "telegram", "web", "terminal")
STEMS = (
    "no longer running",
    "can stop this",
    "can stop it",
    "can decide",
    "already decided",
    "no longer waiting for a decision",
    "not set up on this bot",
    "no longer have that question",
    "i forgot",
    "forgotten our",
    "no trace yet",
    "has a trace yet",
    "only an admin can",
    "now see",
    "could not save that",
    "not on the list",
    "not enabled",
    "answer direct messages",
    "does not answer in this chat",
    "i only answer in",
    "could not open the",
    "asking again",
)
"""Pieces of the sentences ``adapters.words`` holds: a string literal in a surface that
contains one is a copy that will drift."""


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
    return found


def test_no_surface_words_a_sentence_of_its_own() -> None:
    copies = []
    for surface in SURFACES:
        for path in sorted((ROOT / "adapters" / surface).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, text in _literals(tree):
                said = "\n" not in text  # a docstring or comment block is not said to anyone
                if said and any(stem in text.lower() for stem in STEMS):
                    copies.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not copies, "say these through adapters.words:\n" + "\n".join(copies)


@pytest.mark.parametrize(
    ("approvers", "asker", "said"),
    [
        ("asker", None, "Only the person who asked or an admin can decide this."),
        ("asker", "<@1001>", "Only <@1001> or an admin can decide this."),
        ("admins", "<@1001>", "Only an admin can decide this."),
    ],
)
def test_who_may_decide_in_one_wording(approvers: str, asker: str | None, said: str) -> None:
    assert words.decide_refused(approvers, asker) == said


def test_the_line_under_a_waiting_action() -> None:
    assert words.who_may_decide("anyone") == "anyone here can decide"
    assert words.who_may_decide("asker", "@ada") == "only @ada or an admin can decide"
    assert words.stop_refused() == "Only the person who asked or an admin can stop this run."


def test_a_tool_at_work_in_its_own_words_else_by_its_rendered_name() -> None:
    assert words.acting(ToolDisplay("🔎", "Searching"), "`search`") == ("🔎", "Searching")
    assert words.acting(None, "`my_tool`") == ("🛠️", "Running `my_tool`")


def test_a_stopped_run_is_said_the_same_way_on_every_surface() -> None:
    shown = words.stopped("<@U1>", 2, shown=lambda who: who.strip("<@>"))
    assert shown == "Stopped by U1 after step 2."
    assert words.stopped(None, 0) == "Stopped before the first step."
    restart = words.stopped(words.SHUTDOWN, 1, shown=lambda who: "never shown")
    assert restart == "Stopped after step 1: reactbot was restarting. Ask again in a moment."


def test_every_button_is_labelled_in_the_shared_words() -> None:
    """A button's words (``words.BUTTONS``) are written once: no surface's Python or the web
    chat's script holds one of its own (Telegram's "Always allow" beside "Allow in this
    conversation" elsewhere was the drift)."""
    from adapters.words import BUTTONS, labels_json

    shown = {t for label in BUTTONS.values() for t in (label.text, str(label)) if t}
    copies = []
    for surface in SURFACES:
        for path in sorted((ROOT / "adapters" / surface).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            copies += [f"{path.name}:{n}: {t!r}" for n, t in _literals(tree) if t.strip() in shown]
    for path in sorted((ROOT / "adapters" / "web" / "static").glob("*.js")):
        script = path.read_text(encoding="utf-8")
        copies += [f"{path.name}: {t!r}" for t in shown if f'"{t}"' in script]
    assert not copies, "label these through adapters.words.BUTTONS:\n" + "\n".join(copies)
    assert {k: str(v) for k, v in BUTTONS.items()} == json.loads(labels_json())
