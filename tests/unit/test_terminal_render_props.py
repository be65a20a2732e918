"""The terminal renderer for whatever a model or a web page writes: it terminates quickly and
sends no control sequence of its own making: a page cannot clear the screen, retitle the
window or plant a clickable OSC 8 link. Piped output holds no control character but newlines."""

from __future__ import annotations

import io
import re

from hypothesis import HealthCheck, given, settings
from rich.console import Console

from adapters.terminal.render import TerminalRenderer, printable
from tests.hostile import DrawnRun, runs
from tests.unit.test_discord_render_props import bounded

PROPERTY = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ESCAPES = ["\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "\x1b[2J", "\x1b]0;title\x07"]
_RICH_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # the styling rich itself adds on a terminal


def render(run: DrawnRun, *, terminal: bool) -> str:
    out = io.StringIO()
    colors = "standard" if terminal else None  # piped: what `reactbot ask | grep` sees
    console = Console(file=out, force_terminal=terminal, color_system=colors, width=100)
    renderer = TerminalRenderer(console)
    for event in run.events:
        renderer.handle(event)
    return out.getvalue()


@PROPERTY
@given(runs())
def test_piped_output_holds_no_control_characters(run: DrawnRun) -> None:
    text = bounded(lambda: render(run, terminal=False))
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)


@PROPERTY
@given(runs())
def test_on_a_terminal_only_richs_own_styling_is_sent(run: DrawnRun) -> None:
    text = bounded(lambda: render(run, terminal=True))
    assert "\x1b" not in _RICH_STYLE.sub("", text)


def test_escape_sequences_from_a_page_are_shown_not_obeyed() -> None:
    for sequence in ESCAPES:
        shown = printable(f"before {sequence} after")
        assert "\x1b" not in shown and "\x07" not in shown
        assert "␛" in shown and shown.startswith("before ") and shown.endswith(" after")
    assert printable("line\n\tindented") == "line\n\tindented"
