"""core.cuts: text shortened for a message says so truthfully, at a heading, paragraph, line
or word, and never with a note longer than what it left out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.cuts import CUT_NOTE, SLACK, cut_in, shorten
from tests.properties import property_settings

PIECES = st.sampled_from(["word ", "wörd ", "拉取", "\n", "\n\n", "## Step\n", "# H\n", "x", " "])
TEXTS = st.lists(PIECES, max_size=400).map("".join) | st.text(max_size=3000)


@property_settings(300)
@given(text=TEXTS, limit=st.integers(1, 2000))
def test_shortened_text_is_the_text_or_a_prefix_with_a_true_note(text: str, limit: int) -> None:
    out = shorten(text, limit)
    if out == text:  # whole: it fits, or nearly, or the note would outweigh the cut
        longest_note = len(CUT_NOTE.format(rest=len(text))) + 2
        assert len(text) <= limit + limit // SLACK or len(text) - limit <= longest_note
        return
    cut = cut_in(out)
    assert cut is not None
    assert text.startswith(cut.shown) and len(cut.shown) <= limit
    left_out = text[len(cut.shown) :]
    assert cut.rest >= len(left_out.lstrip()) and cut.rest > len(CUT_NOTE.format(rest=cut.rest))
    assert out.endswith(CUT_NOTE.format(rest=cut.rest))
    stop = len(text) - cut.rest  # where it was cut: a heading, a break or a space, else limit
    assert stop == limit or text[stop] in " \n"


def test_a_notice_is_never_longer_than_what_it_cut() -> None:
    """Issue 42: 14 characters cut under a 60-character notice."""
    text = "word " * 402 + "end"  # 2,013 characters
    assert shorten(text, 2000) == text
    assert shorten(text, 1500) != text


def test_a_how_to_is_cut_before_a_heading_not_mid_word() -> None:
    text = "# Setup\n\n## 1. Create\n\n" + "make it " * 150 + "\n\n## 2. Serve\n\n" + "run " * 300
    out = shorten(text, 2000)
    cut = cut_in(out)
    assert cut is not None and cut.shown.endswith("make it")
    assert cut.rest == len(text) - text.index("\n\n## 2. Serve") - 1
