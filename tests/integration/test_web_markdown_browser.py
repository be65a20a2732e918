"""The web chat's Markdown renderer (``adapters/web/static/markdown.js``) in headless Chromium,
as a property: whatever the text, it draws only the elements it knows, links only http(s)
URLs, keeps every character of the text, never runs what the text says, and takes about as
long per character on a long hostile run as on a short one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_trace_page_browser import ROOT, chromium  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

SCRIPT = (ROOT / "adapters" / "web" / "static" / "markdown.js").read_text(encoding="utf-8")
ALLOWED = {
    "DIV", "P", "H3", "H4", "H5", "H6", "UL", "OL", "LI", "BLOCKQUOTE", "PRE", "CODE", "TABLE",
    "THEAD", "TBODY", "TR", "TH", "TD", "STRONG", "EM", "S", "A", "SPAN", "HR",
}  # fmt: skip

# fmt: off
PIECES = (
    "# ", "### ", "**", "__", "*", "_", "~~", "`", "```", "~~~", "[", "]", "(", ")", "<", ">",
    "|", "---", "- ", "1. ", "> ", "\n", "\n\n", " ", "&", "<script>window.__ran=true</script>",
    "<img src=x onerror=window.__ran=true>", "javascript:alert(1)", "[t](javascript:alert(1))",
    "[t](https://evil.example/a)", "https://a.example/x?y=1&z=2", "| a | b |\n|---|---|\n",
    "data:text/html,hi", "\u202e", "Ω", "\\", '"', "'",
)
# fmt: on
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=40).map("".join)

CHECK = """(texts) => texts.map((text) => {
    window.__ran = false;
    const node = window.reactbotMarkdown(text);
    document.body.replaceChildren(node);
    const tags = [...node.querySelectorAll("*")].map((e) => e.tagName);
    const hrefs = [...node.querySelectorAll("a")].map((a) => a.getAttribute("href"));
    const handlers = [...node.querySelectorAll("*")].flatMap((e) =>
        [...e.attributes].map((a) => a.name).filter((n) => n.startsWith("on") || n === "style"));
    return { tags, hrefs, handlers, text: node.textContent, ran: window.__ran };
})"""


@pytest.fixture(scope="module")
def page(chromium: str) -> Iterator[Any]:  # noqa: F811 - the fixture
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        tab = browser.new_page()
        tab.set_content("<!doctype html><html><body></body></html>")
        tab.add_script_tag(content=SCRIPT)
        yield tab
        browser.close()


def letters(text: str, *, source: bool = False) -> str:
    """What must survive drawing: the letters and digits, in order (a code fence's line,
    language tag and all, is syntax in the source)."""
    if source:
        lines = [x for x in text.split("\n") if not re.match(r"\s{0,3}(```|~~~)", x)]
        text = "\n".join(re.sub(r"^\s*\d{1,9}[.)]\s", "", x) for x in lines)  # list numbers
    return "".join(c for c in text if c.isalnum())


def subsequence(wanted: str, shown: str) -> bool:
    """Every character of ``wanted`` appears in ``shown``, in order (the drawing may add:
    a list's number, a link's URL beside its text)."""
    rest = iter(shown)
    return all(c in rest for c in wanted)


def _linked(text: str) -> bool:
    """A link's label and its URL are both shown, so the letters come out in another order."""
    return "](" in text


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(TEXT, min_size=20, max_size=20))
def test_any_text_draws_known_elements_and_safe_links_only(page: Any, texts: list[str]) -> None:
    for text, drawn in zip(texts, page.evaluate(CHECK, texts), strict=True):
        assert set(drawn["tags"]) <= ALLOWED, (text, drawn["tags"])
        assert drawn["handlers"] == [], (text, drawn["handlers"])
        assert not drawn["ran"]
        for href in drawn["hrefs"]:
            assert href.startswith(("http://", "https://")), (text, href)
        # Nothing of the text is lost (links add their URL, so the drawing may hold more).
        kept = subsequence(letters(text, source=True), letters(drawn["text"]))
        assert kept or _linked(text), text


@pytest.mark.parametrize("piece", ["*", "**", "`", "[a](", "[", "|", "# ", "_", "~~", "https://"])
def test_long_runs_of_one_delimiter_draw_in_linear_time(page: Any, piece: str) -> None:
    timing = """([piece, n]) => {
        const text = piece.repeat(Math.ceil(n / piece.length)).slice(0, n);
        let best = Infinity;
        for (let i = 0; i < 3; i++) {
            const start = performance.now();
            window.reactbotMarkdown(text);
            best = Math.min(best, performance.now() - start);
        }
        return best;
    }"""
    small = page.evaluate(timing, [piece, 2_000])
    large = page.evaluate(timing, [piece, 40_000])  # 20x: linear 20x, quadratic 400x
    assert large < 100 * max(small, 0.5), f"{piece!r}: {small:.2f} ms then {large:.2f} ms"


def test_a_wrapped_list_item_stays_one_item(page: Any) -> None:
    text = "- one item that\nwraps onto two lines\n- two\n\n  still two\n\nafter the list"
    drawn = page.evaluate(
        """(text) => {
        const node = window.reactbotMarkdown(text);
        return [...node.children].map((e) => [e.tagName, [...e.children].map((c) => c.innerText)]);
    }""",
        text,
    )
    assert drawn == [
        ["UL", ["one item that wraps onto two lines", "two\nstill two"]],
        ["P", []],
    ]
