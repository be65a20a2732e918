"""The trace page with hostile text in every field: escaped everywhere, bounded, links safe."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import jinja2
import markupsafe
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.web import (
    FIELD_CHARS,
    PAGE_CHARS,
    _environment,
    parting,
    render_compare,
    render_trace,
    stylesheet,
)
from core.replay import diff_traces
from core.text import neutral_bidi
from core.trace import ApprovalRecord, Trace, TraceAttachment, TraceStep
from tests.hostile import hostile_text
from tests.properties import property_settings

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

ATTACK = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='alert(1)",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "https://ok.example/a",
    'https://ok.example/"onmouseover="x',
    "https://ok.example/<script>",
    "http://[::1",
    "</pre></details><script>x</script>",
    "{{ 7*7 }}{% raw %}",
    "</style><script>x</script>",
    "<!--",
    "]]>",
    "\x00\x0b\x1b[31m",
]
text = st.one_of(st.sampled_from(ATTACK), hostile_text(max_pieces=6), st.text(max_size=200))
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "section", "article",
    "p", "h1", "h2", "code", "dl", "div", "dt", "dd", "ol", "ul", "li", "span", "b", "pre",
    "details", "summary", "a", "br",
}  # fmt: skip
ALLOWED_ATTRS = {
    "lang", "charset", "name", "content", "class", "id", "href", "rel", "referrerpolicy",
    "download", "title",
}  # fmt: skip


@st.composite
def hostile_traces(draw: st.DrawFn) -> Trace:
    trace = Trace(
        question=draw(text),
        id=draw(text.filter(bool)),
        conversation=draw(text),
        user=draw(text),
        user_id=draw(text),
        channel=draw(text),
        models=draw(st.lists(text, max_size=3)),
        answer=draw(st.none() | text),
        status=draw(st.sampled_from(["answered", "failed", "cancelled"]) | text),  # type: ignore[arg-type]
        reason=draw(st.none() | text),
        stopped_by=draw(st.none() | text),
        stopped_by_id=draw(st.none() | text),
        notices=draw(st.lists(text, max_size=2)),
        cited=draw(st.lists(text, max_size=3)),
        mode=draw(text),
        persona=draw(text),
        replay_of=draw(st.none() | text),
    )
    trace.started_at, trace.ended_at = 100.0, 100.0 + draw(st.floats(0, 1e6))
    for n in range(1, draw(st.integers(0, 5)) + 1):
        approval = ApprovalRecord(
            draw(st.sampled_from(["approved", "edited", "denied"]) | text),
            by=draw(text),
            input=draw(text),
            reason=draw(text),
        )
        trace.steps.append(
            TraceStep(
                index=n,
                kind=draw(st.sampled_from(["step", "format_error", "final"])),
                thought=draw(text),
                action=draw(st.none() | text),
                action_input=draw(st.none() | text),
                observation=draw(st.none() | text),
                error=draw(st.none() | text),
                raw=draw(text),
                reasoning=draw(text),
                sources=draw(st.lists(text, max_size=4)),
                started_at=100.0 + n,
                ended_at=100.0 + n + draw(st.floats(0, 1e5)),
                model=draw(text),
                approval=approval if draw(st.booleans()) else None,
                attachments=[TraceAttachment(draw(text), 10, None, draw(text))],
            )
        )
    return trace


class Page(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def fields_of(trace: Trace) -> list[str]:
    values = [trace.question, trace.user, trace.conversation, trace.mode, *trace.notices]
    values += [trace.channel, trace.user_id if trace.user else ""]
    values += [v for v in (trace.persona, trace.replay_of) if v]
    values += [v for v in (trace.answer, trace.reason, trace.stopped_by) if v]
    several_models = len({s.model for s in trace.steps if s.model} | set(trace.models)) > 1
    for step in trace.steps:
        values += [step.thought, step.model if several_models else ""]
        values += [v for v in (step.action, step.observation) if v]
        values += [step.action_input] if step.action and step.action_input else []
    values = [v for v in values if v and len(v) <= FIELD_CHARS]
    if sum(map(len, _all_text(trace))) > PAGE_CHARS:  # past it, long fields show a preview
        values = [trace.question] if len(trace.question) <= FIELD_CHARS else []
    return values


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return _environment()


def check_page(html: str, traces: list[Trace], *, query: str) -> None:
    assert "<script" not in html.lower()
    parser = Page()
    parser.feed(html)
    parser.close()
    allowed_hrefs = {s for t in traces for s in [*t.cited, *t.sources]}
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, tag
        assert set(attrs) <= ALLOWED_ATTRS, attrs
        href = attrs.get("href")
        if href is None:
            continue
        if href.startswith("#"):
            assert href == "#parts"
        elif query in href:  # our own downloads: a relative path to the quoted id
            assert urlsplit(href).scheme == "" and not href.startswith("//")
        else:
            assert href in allowed_hrefs
            assert urlsplit(href).scheme in ("http", "https")
            assert attrs.get("rel") == "noopener noreferrer nofollow"
    for trace in traces:
        for value in fields_of(trace):  # shown, escaped: whole, at least once
            assert str(markupsafe.escape(neutral_bidi(value))) in html  # controls shown as such
    # Bounded: at most each field twice (preview and whole), each char escaped to 6, plus
    # the fixed parts of the page.
    size = sum(len(v) for t in traces for v in _all_text(t))
    assert len(html) <= 40_000 + 10_000 * sum(len(t.steps) + 1 for t in traces) + 14 * size


def _all_text(trace: Trace) -> list[str]:
    out = [trace.question, trace.id, trace.user, trace.conversation, trace.mode, trace.status]
    out += [trace.user_id, trace.channel, trace.stopped_by_id or ""]
    out += [*trace.models, *trace.notices, *trace.cited, trace.answer or "", trace.reason or ""]
    out += [trace.stopped_by or "", trace.persona, trace.replay_of or ""]
    for s in trace.steps:
        out += [s.thought, s.action or "", s.action_input or "", s.observation or "", s.error or ""]
        out += [s.raw, s.reasoning, s.model, *s.sources, *(a.describe() for a in s.attachments)]
        out += [s.approval.describe()] if s.approval else []
    return out


@property_settings(150)
@given(trace=hostile_traces())
def test_every_field_is_escaped_and_only_http_sources_are_links(
    env: jinja2.Environment, trace: Trace
) -> None:
    query = "exp=1&sig=" + "a" * 64
    check_page(render_trace(env, trace, query=query), [trace], query=query)


@property_settings(60)
@given(a=hostile_traces(), b=hostile_traces())
def test_the_comparison_is_escaped_too(env: jinja2.Environment, a: Trace, b: Trace) -> None:
    query = "exp=1&sig=" + "b" * 64
    check_page(render_compare(env, a, b, query_a=query, query_b=query), [a, b], query=query)


@given(
    a=st.lists(st.tuples(text, text, text), max_size=6),
    b=st.lists(st.tuples(text, text, text), max_size=6),
)
def test_the_page_parts_the_runs_where_trace_diff_does(
    a: list[tuple[str, str, str]], b: list[tuple[str, str, str]]
) -> None:
    def trace(rows: list[tuple[str, str, str]]) -> Trace:
        made = Trace(question="q", answer="same")
        made.steps = [
            TraceStep(i + 1, action=x, action_input=y, observation=z)
            for i, (x, y, z) in enumerate(rows)
        ]
        return made

    left, right = trace(a), trace(b)
    diff = diff_traces(left, right)
    at_left, at_right, verdict = parting(left, right)
    assert verdict == diff.summary()
    if diff.first is None or diff.rows[diff.first].label == "answer":
        assert at_left is None and at_right is None
    else:
        label = diff.rows[diff.first].label
        assert at_left is not None and at_right is not None
        for steps, at in ((left.steps, at_left), (right.steps, at_right)):
            assert at == len(steps) or str(steps[at].index) == label


def test_a_huge_observation_is_folded_and_bounded(env: jinja2.Environment) -> None:
    trace = Trace(question="q", id="abc")
    trace.steps.append(TraceStep(1, action="read", observation="<i>" * 1_000_000))
    html = render_trace(env, trace, query="exp=1&sig=" + "c" * 64)
    assert "show all 3,000,000 characters of the observation" in html
    assert "more characters: download the JSON" in html
    assert len(html) < 3 * FIELD_CHARS * 4


def test_the_stylesheet_has_no_way_out_of_the_style_element() -> None:
    css = stylesheet()
    assert "</" not in css and "@import" not in css and "url(" not in css


def test_a_page_of_many_huge_observations_stays_bounded(env: jinja2.Environment) -> None:
    trace = Trace(question="q", id="abc", answer="the answer")
    for i in range(1, 51):
        trace.steps.append(TraceStep(i, action="read", observation=f"{i:03d}" + "x" * 100_000))
    html = render_trace(env, trace, query="exp=1&sig=" + "c" * 64)
    assert len(html) < PAGE_CHARS + 400_000
    assert "this page is full, download the JSON for the whole observation" in html
    assert "050xxx" in html  # every step still shows its preview
    assert html.count("show all 100,003 characters of the observation") == 15


def test_a_failed_run_is_not_drawn_in_green_and_a_thought_step_says_no_action() -> None:
    env = _environment()
    failed = Trace(question="q", id="f1", status="failed", reason="the model is down")
    failed.steps.append(TraceStep(1, thought="hmm"))
    page = render_trace(env, failed, query="exp=1&sig=" + "a" * 64)
    assert 'class="answer a-failed"' in page and ">thought<" not in page
    assert "no action" in page


def test_a_replayed_observation_is_marked() -> None:
    replay = Trace(question="q", id="r1", status="answered", replay_of="o1")
    replay.steps.append(TraceStep(1, action="calculate", observation="4", replayed=True))
    page = render_trace(_environment(), replay, query="exp=1&sig=" + "a" * 64)
    assert "Observation (replayed from the original trace)" in page


def test_the_page_names_the_asker_and_the_channel_with_their_ids_in_a_tooltip() -> None:
    trace = Trace(question="q", id="n1", user="Ada Lovelace", user_id="U1ADA", channel="#general")
    trace.conversation = "slack:T0TEAM:C1GENERAL:1700000000.000002"
    trace.stopped_by, trace.stopped_by_id = "bob", "4242"
    page = render_trace(_environment(), trace, query="exp=1&sig=" + "a" * 64)
    assert '<dt>asked by</dt><dd title="U1ADA">Ada Lovelace</dd>' in page
    assert f'<dt>where</dt><dd title="{trace.conversation}">#general</dd>' in page
    assert '<dt>stopped by</dt><dd title="4242">bob</dd>' in page
    assert ">U1ADA<" not in page and f">{trace.conversation}<" not in page
    again = Trace.from_json(trace.to_json())  # the JSON keeps the ids
    assert (again.user_id, again.channel, again.stopped_by_id) == ("U1ADA", "#general", "4242")
    unnamed = Trace(question="q", id="n2", user="U1ADA", conversation="slack:T:C")
    page = render_trace(_environment(), unnamed, query="exp=1&sig=" + "a" * 64)
    assert '<dd title="slack:T:C">slack:T:C</dd>' in page  # no name given: the id shows
