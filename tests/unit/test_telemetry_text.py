"""What telemetry puts into spans from outside (model text, tool output, questions, tool
names) is bounded, free of secrets and always encodable: one lone surrogate would make the
exporter drop a whole batch of spans."""

from __future__ import annotations

import json
import string

from hypothesis import example, given
from hypothesis import strategies as st

from bot.logs import REDACTED, RedactSecrets
from bot.telemetry import NAME_LIMIT, Capture, Provider, _messages, bounded, encodable

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=3000)
"""Every code point, lone surrogates included (Hypothesis leaves them out by default)."""
SECRETS = st.lists(st.text(string.ascii_letters + string.digits, min_size=6, max_size=40))


def capture(secrets: list[str], limit: int) -> Capture:
    return Capture(RedactSecrets(secrets).redact, limit=limit)


@given(text=ANY_TEXT, secrets=SECRETS, limit=st.integers(1, 2000), cut=st.integers(0, 3000))
@example(text="a\ud800b", secrets=[], limit=10, cut=0)
@example(text="\udfff" * 3000, secrets=["sk-abcdef"], limit=1, cut=1500)
def test_captured_text_is_bounded_secret_free_and_encodable(
    text: str, secrets: list[str], limit: int, cut: int
) -> None:
    for secret in secrets:  # put each secret in, anywhere, even where the cut falls
        text = text[:cut] + secret + text[cut:]
    out = capture(secrets, limit).text(text)
    out.encode("utf-8")  # strict: raises on a lone surrogate
    assert len(out) <= limit + len("… [999,999 more characters]")
    for secret in secrets:
        assert secret not in out


@given(text=st.text(max_size=500))
def test_short_clean_text_is_kept_as_it_is(text: str) -> None:
    assert capture([], 500).text(text) == text


def test_a_secret_cut_in_half_by_the_limit_leaves_no_part_of_it() -> None:
    secret = "sk-0123456789abcdef"
    out = capture([secret], 10).text("x" * 5 + secret + "y" * 100)
    assert out.startswith("xxxxx" + REDACTED[:5]) and "sk-0" not in out


@given(name=ANY_TEXT, limit=st.integers(1, 300))
@example(name="calc\ud800", limit=300)
def test_names_are_bounded_and_encodable(name: str, limit: int) -> None:
    out = bounded(name, limit)
    out.encode("utf-8")
    assert len(out) <= limit + 1
    if len(name) <= limit and encodable(name) == name:
        assert out == name


def test_a_huge_tool_name_from_the_model_is_cut() -> None:
    assert len(bounded("a" * 1_000_000)) == NAME_LIMIT + 1


@given(parts=st.lists(ANY_TEXT, max_size=4))
def test_messages_are_json_in_the_conventions_shape(parts: list[str]) -> None:
    safe = capture([], 100)
    text = _messages("assistant", [{"type": "text", "content": safe.text(p)} for p in parts])
    text.encode("utf-8")
    (message,) = json.loads(text)
    assert message["role"] == "assistant"
    assert [p["content"] for p in message["parts"]] == [safe.text(p) for p in parts]


def test_the_server_of_an_openai_compatible_endpoint() -> None:
    assert Provider.openai_compatible(None).server == ("api.openai.com", 443)
    local = Provider.openai_compatible("http://localhost:11434/v1")
    assert (local.name, local.server, local.in_process) == ("openai", ("localhost", 11434), False)
    assert Provider.openai_compatible("https://api.deepseek.com").server == (
        "api.deepseek.com",
        443,
    )
