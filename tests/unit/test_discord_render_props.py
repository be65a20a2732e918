"""Properties of the Discord renderer for whatever a model, a web page or a user writes.

Every payload fits Discord's limits (2,000 characters of content, at most 10 files, a thread
name of 1-100 characters), closes every code block it opens, pings nobody and holds no
masked link but the Sources line's own, each named by its real host. Rendering takes bounded
time and memory: ``bounded`` fails a render that runs away instead of hanging the suite.
"""

from __future__ import annotations

import re
import signal
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.render import (
    CONTENT_LIMIT,
    FENCE,
    TRACE_REPLY_LIMIT,
    DiscordPayload,
    DiscordRenderer,
    answer_overflow,
    sources_line,
    split_text,
    thread_name,
)
from adapters.live import VERBOSITIES, RunView, Verbosity, fallback_text
from core.events import Finished
from core.trace import Trace, TraceStep, source_domain
from tests.hostile import DrawnRun, hostile_text, runs, url, urls
from tests.properties import property_settings

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

T = TypeVar("T")

PROPERTY = property_settings(500)

_PING = re.compile(r"@(everyone|here)|<@[!&]?\d")
_LINK = re.compile(r"\[([^\[\]\n]*)\]\(\s*<?([^()<>\s]*)>?\s*\)")


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupts a pure-Python loop that runs away (a render must never hang the process).

    The limit is on this process's CPU time (``ITIMER_PROF``), not the wall clock: the work a
    render does is fixed, the share of a shared machine it gets is not (four test workers on
    two cores), and only the first says whether a renderer went quadratic."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"rendering took longer than {seconds} s of CPU")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def bounded(render: Callable[[], T], *, seconds: float = 5.0, megabytes: float | None = None) -> T:
    """``render()`` within ``seconds``; with ``megabytes``, also within that peak memory
    (tracemalloc slows everything down, so only the explicit big-input tests measure it)."""
    if megabytes is None:
        with time_limit(seconds):
            return render()
    tracemalloc.start()
    try:
        with time_limit(seconds):
            result = render()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < megabytes * 1024 * 1024, f"peak memory {peak / 1e6:.1f} MB"
    return result


def check(payload: DiscordPayload, *, limit: int = CONTENT_LIMIT) -> None:
    content = payload.content
    assert len(content) <= limit, len(content)
    assert content.count(FENCE) % 2 == 0, "a code block is left open"
    assert not _PING.search(content), content
    assert len(payload.files) <= 10
    for match in _LINK.finditer(content):
        label, target = match.groups()
        assert label and label == source_domain(target), match.group()


def view_of(run: DrawnRun, upto: int | None = None, verbosity: Verbosity = "full") -> RunView:
    view = RunView(started_at=0.0, verbosity=verbosity)
    for event in run.events[:upto]:
        view.apply(event)
    return view


@PROPERTY
@given(runs(), st.data())
def test_live_payloads_fit_at_every_point_of_a_run(run: DrawnRun, data: st.DataObject) -> None:
    upto = data.draw(st.integers(min_value=1, max_value=len(run.events)))
    verbosity = data.draw(st.sampled_from(VERBOSITIES))
    renderer = DiscordRenderer(clock=lambda: 3.0)
    view = view_of(run, upto, verbosity)
    payload = bounded(lambda: renderer.live(view))
    check(payload)
    assert (payload.approval is not None) == (view.pending is not None)  # at every verbosity


@PROPERTY
@given(runs(finished=True), st.sampled_from(VERBOSITIES))
def test_final_compact_plain_and_thread_fit(run: DrawnRun, verbosity: Verbosity) -> None:
    view = view_of(run, verbosity=verbosity)
    renderer = DiscordRenderer(clock=lambda: 3.0)
    final = bounded(lambda: renderer.final(view))
    check(final)
    assert 1 <= len(final.thread_name) <= 100 and final.thread_name.strip()
    check(renderer.compact(view), limit=1000)
    check(renderer.plain(fallback_text(view)))
    posts = bounded(lambda: renderer.trace_posts(run.trace))
    assert posts
    for post in posts:
        check(post)
    reply = bounded(lambda: renderer.trace_reply(run.trace))  # /trace
    check(reply, limit=TRACE_REPLY_LIMIT)
    assert reply.content.startswith("-# ") and len(reply.files) == 2


@PROPERTY
@given(hostile_text(max_pieces=30), st.integers(min_value=-50, max_value=4000))
def test_split_text_terminates_and_every_part_fits(text: str, limit: int) -> None:
    parts = bounded(lambda: split_text(text, limit))
    for part in parts:
        assert len(part) <= max(limit, 64)
        assert part.count(FENCE) % 2 == 0
    if FENCE not in text:  # nothing added or lost but line breaks and blank parts
        assert re.sub(r"\s", "", "".join(parts)) == re.sub(r"\s", "", text)


@PROPERTY
@given(st.lists(urls, max_size=40))
def test_the_sources_line_is_bounded_and_links_only_to_real_hosts(cited: list[str]) -> None:
    line = sources_line(cited)
    assert len(line) <= 600
    check(DiscordPayload(line))


@PROPERTY
@given(hostile_text())
def test_thread_names_are_never_empty_or_too_long(question: str) -> None:
    name = thread_name(question)
    assert 1 <= len(name) <= 100 and name.strip()


def answered(answer: str, cited: list[str]) -> RunView:
    trace = Trace(question="q", models=["m"], answer=answer, status="answered", cited=cited)
    trace.steps.append(TraceStep(1, kind="final"))
    view = RunView()
    view.apply(Finished(trace, answer, "answered"))
    return view


def test_a_1900_character_url_in_the_sources_no_longer_freezes_discord() -> None:
    """The defect a new user hit: the room left for the answer went to zero and split_text
    appended empty strings forever."""
    view = answered("See the source.", [url(1900)])
    final = bounded(lambda: DiscordRenderer().final(view), seconds=2)
    check(final)
    assert final.content.startswith("See the source.")
    assert "example.com (link too long to show; it is in the trace)" in final.content
    three = answered("Three sources.", [url(600) + str(i) for i in range(3)])
    check(bounded(lambda: DiscordRenderer().final(three), seconds=2))


HUGE = "x" * 1_000_000


def huge_trace() -> Trace:
    """A 1 MB question and answer, 50 steps of 100 KB thoughts, 1 MB inputs, observations
    ending in an open fence, 5,000-character source URLs."""
    trace = Trace(question=HUGE, models=["m"], answer=HUGE, status="answered")
    for n in range(1, 51):
        trace.steps.append(
            TraceStep(
                n,
                thought=HUGE[:100_000],
                action="search",
                action_input=HUGE,
                observation=HUGE[:100_000] + FENCE,
                sources=[url(5000)],
            )
        )
    trace.cited = [url(5000)] * 3
    return trace


def test_huge_inputs_render_in_bounded_time_and_memory() -> None:
    big, trace = HUGE, huge_trace()
    view = RunView()
    view.apply(Finished(trace, big, "answered"))
    renderer = DiscordRenderer()
    check(bounded(lambda: renderer.final(view), seconds=10, megabytes=200))
    posts = bounded(lambda: renderer.trace_posts(trace), seconds=20, megabytes=400)
    assert len(answer_overflow(trace)) >= 400
    # a thread people read: 30 answer posts at most, one post per step, the rest attached
    assert len(posts) <= 30 + 1 + 50 + 1, len(posts)
    attached = {f.name for p in posts for f in p.files}
    assert {"answer-continued.md", "question.md", "step-1-thought.md"} <= attached
    for post in posts:
        check(post)
    reply = bounded(lambda: renderer.trace_reply(trace), seconds=20, megabytes=400)
    check(reply, limit=TRACE_REPLY_LIMIT)


def test_masked_links_from_a_tool_are_shown_not_clickable() -> None:
    view = RunView()
    trace = Trace(question="q", models=["m"], answer="ok", status="answered")
    trace.steps.append(
        TraceStep(
            1,
            thought="[Verify your account](https://evil.example)",
            action="search",
            action_input="x",
            observation="[Verify your account](https://evil.example)",
        )
    )
    view.apply(Finished(trace, "[click](https://evil.example)", "answered"))
    payloads = [DiscordRenderer().final(view), *DiscordRenderer().trace_posts(trace)]
    for payload in payloads:
        assert "](https://evil" not in payload.content
        check(payload)
