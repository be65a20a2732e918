"""The conformance suite's normaliser: the same words in each surface's markup compare
equal, and different words never do."""

from __future__ import annotations

import html

from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from tests.conformance.driver import normalise

PLAIN = st.text(
    alphabet=st.characters(
        categories=("L", "N", "Zs"), exclude_characters="*_~`<>&@:", max_codepoint=0x2FFF
    ),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() != "")


def test_each_surfaces_markup_of_one_sentence_reads_the_same() -> None:
    said = normalise(words.now_sees("answer"))
    assert normalise(words.now_sees("**answer**")) == said  # Discord, Telegram's commands
    assert normalise(words.now_sees("*answer*")) == said  # Slack mrkdwn
    assert normalise(words.now_sees("<b>answer</b>")) == said  # Telegram HTML
    refused = normalise(words.stop_refused("@ada"))
    assert normalise(words.stop_refused("<@1001>"), {"1001": "ada"}) == refused
    assert normalise(words.stop_refused("<@U1ADA>"), {"U1ADA": "ada"}) == refused
    assert normalise(":warning: I could not save that") == "⚠️ I could not save that"
    assert normalise("a  \n b") == "a b"


@given(PLAIN)
def test_markup_around_plain_words_is_dropped(text: str) -> None:
    plain = normalise(text)
    for marked in (f"**{text.strip()}**", f"*{text.strip()}*", f"<b>{html.escape(text)}</b>"):
        assert normalise(marked) == plain


@given(PLAIN, PLAIN)
def test_different_words_stay_different(a: str, b: str) -> None:
    if " ".join(a.split()) != " ".join(b.split()):
        assert normalise(a) != normalise(b)


@given(st.text(max_size=200))
def test_any_text_normalises_without_error_to_single_spaced_text(text: str) -> None:
    out = normalise(text)
    assert out == " ".join(out.split())
