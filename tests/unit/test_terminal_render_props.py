"""The terminal renderer for whatever a model or a web page writes: it terminates quickly and
sends no control sequence of its own making: a page cannot clear the screen, retitle the
window or plant a clickable OSC 8 link. Piped output holds no control character but newlines."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from adapters.terminal.render import TerminalRenderer, WordWrap, fold, open_fence, printable
from tests.hostile import DrawnRun, runs
from tests.properties import property_settings
from tests.unit.test_discord_render_props import bounded

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

PROPERTY = property_settings(500)
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


# ---- word wrapping and folding (issue 15) ------------------------------------------------

WIDTHS = st.integers(min_value=-3, max_value=120)
STREAM_TEXT = st.lists(
    st.sampled_from([*"ab cd\n\t-", "中", "文", "👍", "é", "\u0301", "x" * 3]), max_size=200
).map("".join)


@PROPERTY
@given(st.lists(STREAM_TEXT, max_size=12), WIDTHS, st.integers(min_value=0, max_value=130))
def test_word_wrap_keeps_every_line_within_the_width_and_loses_nothing(
    chunks: list[str], width: int, column: int
) -> None:
    wrap = WordWrap(width, column=column)
    out = bounded(lambda: "".join(wrap.feed(c) for c in chunks) + wrap.flush())
    text = "".join(chunks)
    assert "".join(out.split()) == "".join(text.split())  # only whitespace moved
    lines = out.split("\n")
    first = min(max(0, column), max(2, width))
    assert cell_len(lines[0]) + first <= max(2, width)
    assert all(cell_len(line) <= max(2, width) for line in lines[1:])


def test_word_wrap_breaks_at_spaces_not_inside_words() -> None:
    wrap = WordWrap(12, column=9)  # after "Thought: "
    out = wrap.feed("The final was Arg") + wrap.feed("entina vs France") + wrap.flush()
    assert out.split("\n") == ["The", "final was", "Argentina vs", "France"]


@PROPERTY
@given(
    st.lists(st.sampled_from([*"ab\n `~", "```", "~~~", "````"]), max_size=150).map("".join),
    st.integers(min_value=-1, max_value=6),
    st.integers(min_value=-1, max_value=80),
)
def test_a_folded_observation_never_leaves_a_code_fence_open(
    text: str, lines: int, width: int
) -> None:
    folded = bounded(lambda: fold(text, lines=lines, width=width))
    shown = folded.rsplit(" (+", 1)[0] if " (+" in folded else folded
    assert open_fence(shown) is None
    assert len(folded) <= len(text) + 40  # a closing fence and the count, no more


def test_a_folded_lookup_result_closes_its_fence() -> None:
    observation = "1. slack.md › Run it\n```\nreactbot serve --platform slack\n```\nmore\nmore"
    assert fold(observation, lines=3) == (
        "1. slack.md › Run it\n```\nreactbot serve --platform slack\n```"
        f" (+{len(observation) - len(observation.splitlines()[0]) - 36} chars)"
    )


@property_settings(150, ci=8)  # each example renders a whole run through rich, twice
@given(runs(), st.integers(min_value=20, max_value=100))
def test_on_a_terminal_no_line_is_wider_than_the_terminal(run: DrawnRun, width: int) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="standard", width=width)
    renderer = TerminalRenderer(console)
    bounded(lambda: [renderer.handle(event) for event in run.events])
    plain = _RICH_STYLE.sub("", out.getvalue())
    assert all(cell_len(line) <= width for line in plain.split("\n")), plain
