"""A model's Markdown on Telegram: drawn in the HTML Telegram parses, every tag our own, a
masked link shown with its URL, a code block cut between two messages closed and reopened."""

from __future__ import annotations

from adapters.telegram.render import answer_parts_html, markdown_html
from tests.fakes.telegram_server import parse_html


def test_markdown_becomes_telegram_html() -> None:
    shown, left_open = markdown_html(
        "## Result\n**Redis** is *fast*, ~~slow~~ `O(1)`.\n- one\n> quoted\n"
        "[Verify your account](https://evil.example/login) <b>hi</b> & \u202e"
    )
    assert not left_open
    text, entities = parse_html(shown)
    assert text.splitlines() == [
        "Result",
        "Redis is fast, slow O(1).",
        "• one",
        "quoted",
        "Verify your account (https://evil.example/login) <b>hi</b> & \ufffd",
    ]
    kinds = {e["type"] for e in entities}
    assert {"bold", "italic", "strikethrough", "code", "blockquote"} <= kinds
    assert "text_link" not in kinds and "<a" not in shown


def test_a_code_block_cut_between_parts_is_closed_and_reopened() -> None:
    parts = answer_parts_html(["Here:\n```python\nx = 1", "y = 2\n```\ndone <ok>"])
    first, second = (parse_html(p) for p in parts)
    assert first[0] == "Here:\nx = 1" and any(e["type"] == "pre" for e in first[1])
    assert second[0] == "y = 2\ndone <ok>" and any(e["type"] == "pre" for e in second[1])
