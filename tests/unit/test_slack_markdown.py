"""A model's Markdown as Slack mrkdwn: it renders, and outside text still cannot ping anyone,
hide a link behind a label, break out of a code block or take long to convert."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.slack.markdown import RULE, ZWSP, escape, to_mrkdwn

_ANGLED = re.compile(r"<([^<>]*)>")
_PLAIN_URL = re.compile(r"https?://[^\s<>|\[\]()`]{1,500}", re.IGNORECASE)
_ENTITY = re.compile(r"&(?!(?:amp|lt|gt);)")
_BROADCAST = re.compile(r"@(?:here|channel|everyone)\b", re.IGNORECASE)

# fmt: off
PIECES = (
    "# ", "## ", "**", "__", "*", "_", "~~", "`", "```", "~~~", "[", "]", "(", ")", "<", ">",
    "|", "---", "- ", "1. ", "> ", "\n", "\n\n", " ", "\t", "&", "@here", "@channel",
    "<!here>", "<@U123>", "<#C1>", "https://a.example/x?y=1&z=2", "javascript:alert(1)",
    "[t](https://evil.example)", "<https://e.example|Verify>", "| a | b |\n|---|---|\n",
    "word", "C#", "\u202e", "Ω", "\u200b", "\\|", '"',
)
# fmt: on
_PIECES = st.sampled_from(PIECES)
MARKDOWNISH = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=60).map("".join)


def assert_safe(out: str) -> None:
    for token in _ANGLED.findall(out):
        assert _PLAIN_URL.fullmatch(token), f"a link, mention or broadcast formed: <{token}>"
    assert out.count("<") == out.count(">") == len(_ANGLED.findall(out)), out
    assert _ENTITY.search(out) is None, f"a bare &: {out!r}"
    assert out.count("```") % 2 == 0, f"an open code block: {out!r}"
    assert _BROADCAST.search(out) is None, f"a broadcast word after an @: {out!r}"


@settings(max_examples=400, deadline=None)
@given(MARKDOWNISH)
def test_whatever_the_text_the_output_is_safe_and_balanced(text: str) -> None:
    out = to_mrkdwn(text)
    assert_safe(out)
    # Bounded: escaping at most 5x a character, plus a few fixed characters a line.
    assert len(out) <= 5 * len(text) + 16 * (text.count("\n") + 1) + 8


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_unicode_text_is_safe(text: str) -> None:
    assert_safe(to_mrkdwn(text))


@pytest.mark.parametrize(
    "piece",
    [" ", "`", "[a](", "# ", "|", "*", "**", "_", "~~", "[", "![", "<https://", "a|", "- ", "> "],
)
def test_long_runs_of_one_delimiter_convert_in_linear_time(piece: str) -> None:
    """No pattern backtracks: 200,000 characters of one delimiter take about twenty times as
    long as 10,000; a quadratic pattern would take 400 times; 100x is the bound, far from
    both. CPU time, not wall time: on a loaded machine a 1 ms run fits in one time slice
    while a 20 ms one is preempted several times, which once made a linear ratio look 190x."""

    texts = [(piece * (n // len(piece)))[:n] for n in (10_000, 200_000)]
    best = [float("inf"), float("inf")]
    for _ in range(5):  # interleaved, best of each: a busy machine slows both alike
        for i, text in enumerate(texts):
            start = time.thread_time()
            assert_safe(to_mrkdwn(text))
            best[i] = min(best[i], time.thread_time() - start)
    small, large = best  # 20x the text: 20x the time if linear
    assert large < 100 * max(small, 1e-3), f"{piece!r}: {small:.4f}s then {large:.4f}s"


def test_headings_emphasis_and_lists_render() -> None:
    text = (
        "## Results for C#\n"
        "It is **very** fast and *quite* small, ~~not~~ __really__.\n"
        "- first\n"
        "  - nested\n"
        "* second\n"
        "3. third\n"
        "> quoted\n"
        "---\n"
        "Use `x < y` here."
    )
    assert to_mrkdwn(text).split("\n") == [
        "*Results for C#*",
        "It is *very* fast and _quite_ small, ~not~ *really*.",
        "• first",
        "    • nested",
        "• second",
        "3. third",
        "&gt; quoted",
        RULE,
        "Use `x &lt; y` here.",
    ]


def test_a_table_becomes_an_aligned_code_block() -> None:
    text = "| Name | Stars |\n|:-----|------:|\n| **redis** | 60k |\n| rq | 9k |\nAfter."
    assert to_mrkdwn(text).split("\n") == [
        "```",
        "Name  | Stars",
        "------+------",
        "redis | 60k",
        "rq    | 9k",
        "```",
        "After.",
    ]


def test_a_masked_link_shows_its_url_and_a_bare_one_is_a_link() -> None:
    out = to_mrkdwn(
        "[Verify your account](https://evil.example/login) or "
        "[https://docs.example.org/](https://docs.example.org/) or "
        "[run](javascript:void) or <https://e.example|Verify>"
    )
    assert out == (
        "Verify your account (<https://evil.example/login>) or "
        "<https://docs.example.org/> or "
        "run (javascript:void) or https://e.example|Verify"
    )
    assert_safe(out)


def test_pings_stay_text() -> None:
    out = to_mrkdwn("Hey @here and <!channel> and <@U123ABC> in <#C999>, **@everyone**")
    assert out == (
        f"Hey @{ZWSP}here and &lt;!channel&gt; and &lt;@U123ABC&gt; in &lt;#C999&gt;, "
        f"*@{ZWSP}everyone*"
    )
    assert escape("@Channel") == f"@{ZWSP}Channel"


def test_code_blocks_stay_code_and_cannot_be_escaped_from() -> None:
    out = to_mrkdwn("```python\nif a < b and c:\n    print('**no**')\n```\nthen **bold**")
    assert out.split("\n") == [
        "```",
        "if a &lt; b and c:",
        "    print('**no**')",
        "```",
        "then *bold*",
    ]
    # An unclosed fence is closed; a ``` inside a ~~~ block cannot end it early.
    assert to_mrkdwn("```\ncode").split("\n") == ["```", "code", "```"]
    inner = to_mrkdwn("~~~\n```\n<!here>\n~~~\nafter")
    assert inner.split("\n") == ["```", f"`{ZWSP}`{ZWSP}`", "&lt;!here&gt;", "```", "after"]


def test_code_spans_side_by_side_make_no_fence() -> None:
    """Found by hypothesis: two spans whose backticks touch read as a fence on Slack."""
    out = to_mrkdwn("`# ```# `")
    assert "```" not in out and out.count("`") == 5  # every backtick kept, none touching
    assert_safe(out)


def test_a_table_of_wide_characters_lines_up_by_display_columns() -> None:
    from adapters.tables import display_width

    out = to_mrkdwn("| 名前 | n |\n|---|---|\n| 企業版 | 1 |\n| ab | 22 |")
    rows = [line for line in out.split("\n") if "|" in line]
    bars = {display_width(row[: row.index(" | ")]) for row in rows}
    assert len(rows) == 3 and bars == {6}, rows  # 企業版 is 6 columns wide, as the others pad
