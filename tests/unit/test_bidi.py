"""Bidirectional controls from outside text never reach a reader as controls: every surface
shows U+FFFD in their place (one character for one), so "invoice\u202egnp.exe" cannot pass
for "invoiceexe.png"."""

from __future__ import annotations

from collections.abc import Callable

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.render import sanitize
from adapters.slack.markdown import escape, to_mrkdwn
from adapters.slack.stream_render import rendered_len, safe_markdown
from adapters.terminal.render import printable
from adapters.web.render import clean
from bot.web import _environment, render_trace
from core.text import BIDI_CONTROLS, neutral_bidi
from core.trace import Trace, TraceStep

SPOOF = "invoice\u202egnp.exe \u2066x\u2069 \u202ay\u202c"
RENDERERS: dict[str, Callable[[str], str]] = {
    "discord": sanitize,
    "slack escape": escape,
    "slack mrkdwn": to_mrkdwn,
    "slack stream": safe_markdown,
    "terminal": printable,
    "web chat": lambda text: str(clean(text, 10_000)["text"]),
}


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_no_surface_passes_a_bidi_control(name: str) -> None:
    shown = RENDERERS[name](SPOOF)
    assert not set(shown) & set(BIDI_CONTROLS), name
    assert "invoice\ufffdgnp.exe" in shown


@given(st.text(alphabet=st.sampled_from([*BIDI_CONTROLS, "a", "&", "<", "]", "@", " "])))
def test_one_character_for_one(text: str) -> None:
    assert len(neutral_bidi(text)) == len(text)
    assert rendered_len(text) == len(safe_markdown(text))


def test_the_trace_page_shows_none_either() -> None:
    env: jinja2.Environment = _environment()
    trace = Trace(question=SPOOF, answer=SPOOF, id="t1")
    trace.steps.append(TraceStep(1, thought=SPOOF, action="read", observation=SPOOF))
    page = render_trace(env, trace, query="exp=1&sig=" + "a" * 64)
    assert not set(page) & set(BIDI_CONTROLS)
    assert "invoice\ufffdgnp.exe" in page
    assert "<style>" in page and "&lt;style" not in page, "our own stylesheet stays markup"


def test_a_url_holding_a_bidi_control_is_shown_not_linked() -> None:
    """Every page shows a bidirectional control as U+FFFD, so a link's ``href`` would not be
    the URL it came from (and the URL reads in another order than it goes): such a URL is
    text, never a link (the trace page's property test drew ``HTTP://\\u202a``)."""
    from core.text import BIDI_CONTROLS, http_url

    assert http_url("https://example.com/a", limit=2048) == "https://example.com/a"
    for control in BIDI_CONTROLS:
        assert http_url(f"https://example.com/{control}gnp.exe", limit=2048) is None
        assert http_url(f"HTTP://{control}", limit=2048) is None
