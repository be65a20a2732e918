"""``report.html`` of ``reactbot eval --out`` with hostile text in every field: escaped, no
script, its Content-Security-Policy in place, links only to http(s), and bounded in size
whatever the answers (a model may answer a megabyte per case)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import markupsafe
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.evals import results_document
from bot.web import PAGE_CHARS, content_security_policy, fold, stylesheet
from bot.web.report import LABEL_CHARS, render_report
from core.evals import Case, Combination, Expect, Regression, RunResult, summarise
from core.text import neutral_bidi
from core.trace import one_line
from tests.hostile import hostile_text
from tests.properties import property_settings
from tests.unit.test_web_render_props import ATTACK

pytestmark = pytest.mark.no_cover  # a renderer outside core (see test_web_render_props)

text = st.one_of(st.sampled_from(ATTACK), hostile_text(max_pieces=6), st.text(max_size=200))
answers = st.one_of(
    st.none(),
    text,
    st.builds(lambda piece, n: piece * n, st.sampled_from(ATTACK), st.integers(1, 3_000)),
)
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "section", "p", "h1",
    "h2", "code", "div", "table", "thead", "tbody", "tr", "th", "td", "pre", "details",
    "summary", "a", "ul", "li",
}  # fmt: skip
ALLOWED_ATTRS = {"lang", "charset", "name", "content", "class", "href", "rel", "http-equiv"}


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@st.composite
def evals(draw: st.DrawFn) -> tuple[str, list[Case], list[RunResult], dict[str, str | None]]:
    combinations = [
        Combination(draw(text.filter(bool)), draw(text.filter(bool)), draw(text))
        for _ in range(draw(st.integers(1, 3)))
    ]
    cases = [
        Case(
            id=f"{n}{draw(text)}",  # unique, as read_cases makes them
            question=draw(text),
            expect=Expect(draw(st.sampled_from(["exact", "contains", "regex"])), draw(text)),
            line=n,
        )
        for n in range(1, draw(st.integers(1, 4)) + 1)
    ]
    results, links = [], {}
    for combination in combinations:
        for case in cases:
            trace_id = draw(text.filter(bool))
            links[trace_id] = draw(st.none() | text | st.just("https://pages.example/t/1?sig=a"))
            answered = draw(st.booleans())
            results.append(
                RunResult(
                    case=case.id,
                    combination=combination,
                    repeat=draw(st.integers(0, 2)),
                    answer=draw(answers),
                    status=draw(st.sampled_from(["answered", "failed", "unformatted"]) | text),
                    passed=draw(st.booleans()),
                    steps=draw(st.integers(0, 50)),
                    format_errors=draw(st.integers(0, 3)),
                    tokens_in=draw(st.integers(0, 10**9)),
                    tokens_out=draw(st.integers(0, 10**9)),
                    cost_usd=draw(st.none() | st.floats(0, 1e6)),
                    seconds=draw(st.floats(0, 1e5)),
                    trace_id=trace_id,
                    reason=None if answered else draw(text),
                )
            )
    return draw(text), cases, results, links


def shown(value: str) -> str:
    """How a field appears in the page's source: bidi controls made visible, escaped."""
    return str(markupsafe.escape(neutral_bidi(value)))


@property_settings(100, ci=30)
@given(drawn=evals())
def test_every_field_of_the_report_is_escaped_bounded_and_under_its_policy(
    drawn: tuple[str, list[Case], list[RunResult], dict[str, str | None]],
) -> None:
    file, cases, results, links = drawn
    summaries = [summarise(c, results) for c in dict.fromkeys(r.combination for r in results)]
    found = [Regression(r.case, r.combination, r.trace_id) for r in results[:2]]
    document = results_document(
        file=file,
        started_at=0.0,
        summaries=summaries,
        results=results,
        found=found,
        interrupted=False,
        planned=len(results),
    )
    html = render_report(document, summaries, results, {c.id: c for c in cases}, links=links)

    assert "<script" not in html.lower()
    policy = content_security_policy(stylesheet())
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{markupsafe.escape(policy)}">'
    assert html.count(meta) == 1 and html.index(meta) < html.index("<body")
    parser = Page()
    parser.feed(html)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, tag
        assert set(attrs) <= ALLOWED_ATTRS, attrs
        href = attrs.get("href")
        if href is not None:
            # the signed trace links alone (never a field), bidi controls shown as U+FFFD
            assert href in {neutral_bidi(link) for link in links.values() if link}
            assert urlsplit(href).scheme in ("http", "https") and attrs["rel"]
        if tag == "meta" and attrs.get("http-equiv") is not None:
            assert attrs == {"http-equiv": "Content-Security-Policy", "content": policy}
    assert len(re.findall(r"<style\b", html)) == 1  # only our own, hashed stylesheet

    for r in results:  # shown, escaped: labels on one line, answers from their preview
        assert shown(one_line(r.case, LABEL_CHARS)) in html
        assert shown(one_line(r.combination.label, LABEL_CHARS)) in html
        assert shown(one_line(r.trace_id, LABEL_CHARS)) in html
        assert shown(fold(r.answer or "—").preview) in html
    assert shown(one_line(file, LABEL_CHARS)) in html

    # Bounded: answers past their preview share one page's room (``PAGE_CHARS``); every
    # other field is cut to a line; each character escaped to at most 6 (``&quot;``, or a
    # bidi control shown as ``\u202e``), plus the fixed markup of the page and of each row.
    per_run = 3 * LABEL_CHARS + 2 * 500 + 600 + len("https://pages.example/t/1?sig=a")
    per_summary = 3 * LABEL_CHARS + 100
    drawn_chars = (
        PAGE_CHARS
        + len(results) * per_run
        + len(summaries) * per_summary
        + len(found) * 2 * LABEL_CHARS
        + 2 * LABEL_CHARS  # the file: title and heading
    )
    fixed = 10_000 + len(stylesheet()) + 1_000 * (len(results) + len(summaries) + len(found))
    assert len(html) <= fixed + 6 * drawn_chars


def test_a_page_of_megabyte_answers_shows_previews_past_its_room() -> None:
    combination = Combination("m", "text")
    case = Case("c", "q", Expect("exact", "x"), line=1)
    results = [
        RunResult(
            "c", combination, n, "<b>" * 300_000, "answered", False, 1, 0, 1, 1, None, 0.1, f"t{n}"
        )
        for n in range(20)
    ]
    summaries = [summarise(combination, results)]
    document = results_document(
        file="f",
        started_at=0.0,
        summaries=summaries,
        results=results,
        found=[],
        interrupted=False,
        planned=20,
    )
    html = render_report(document, summaries, results, {"c": case}, links={})
    assert "<b>" not in html and "&lt;b&gt;" in html
    assert len(html) < 4 * (PAGE_CHARS + 20 * 3_000), len(html)  # 20 MB of answers in all
    assert html.count("show all 900,000 characters") < 20  # past the room: previews only
