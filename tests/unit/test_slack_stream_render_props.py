"""Property tests for the agent-streaming chunks: whatever a model, a tool or a web page
writes, every chunk and block the renderer makes is one the strict fake (Slack's documented
limits) accepts, pings nobody, makes no masked link, and rendering ends quickly and small
for huge inputs; a streamed answer's pieces put together equal the whole answer rendered."""

from __future__ import annotations

import itertools
import re
import time
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.live import VERBOSITIES, RunView, Verbosity
from adapters.slack.stream_render import (
    MARKDOWN_LIMIT,
    TASK_FIELD,
    clamp,
    ending_markdown,
    markdown_pieces,
    parse_feedback,
    plan_title,
    safe_markdown,
    stop_blocks,
    task_chunks,
)
from tests.fakes.slack_server import block_errors, validate_chunks
from tests.hostile import DrawnRun, hostile_text, runs
from tests.properties import property_settings

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

PROPERTY = property_settings(300)

PING = re.compile(r"<[!@#]|<https?:|@(channel|here|everyone)\b", re.IGNORECASE)
MASKED_LINK = re.compile(r"\]\(")


def assert_harmless(text: str) -> None:
    assert PING.search(text) is None, text[:200]
    assert MASKED_LINK.search(text) is None, text[:200]
    assert "<" not in text and ">" not in text


def view_of(run: DrawnRun, verbosity: Verbosity) -> RunView:
    view = RunView(verbosity=verbosity)
    for event in run.events:
        view.apply(event)
    return view


@PROPERTY
@given(run=runs(max_steps=12), verbosity=st.sampled_from(VERBOSITIES))
def test_every_task_chunk_is_accepted_and_harmless(run: DrawnRun, verbosity: Verbosity) -> None:
    view = view_of(run, verbosity)
    chunks = task_chunks(view)
    if chunks:
        assert validate_chunks(chunks) == []
    if verbosity == "answer":
        assert chunks == []
    for chunk in chunks:
        for key in ("title", "details", "output"):
            if key in chunk:
                assert 0 < len(chunk[key]) <= TASK_FIELD
                assert_harmless(chunk[key])
        for source in chunk.get("sources", ()):
            assert source["url"].startswith(("http://", "https://"))
            assert_harmless(source["text"])
        if verbosity != "full":
            assert set(chunk) == {"type", "id", "title", "status"}
    assert len({c["id"] for c in chunks}) == len(chunks)  # one card per step


@PROPERTY
@given(run=runs(max_steps=8, finished=True), verbosity=st.sampled_from(VERBOSITIES))
def test_a_finished_run_leaves_no_task_in_progress(run: DrawnRun, verbosity: Verbosity) -> None:
    view = view_of(run, verbosity)
    assert view.is_final
    assert all(c["status"] in ("complete", "error") for c in task_chunks(view))
    blocks = stop_blocks(view, run.trace.id)
    assert block_errors(blocks) == []
    ending = ending_markdown(view)
    assert len(ending) <= 1000
    assert_harmless(ending.replace("\n", " "))
    plan = plan_title(view)
    assert 0 < len(plan) <= TASK_FIELD
    assert validate_chunks([{"type": "plan_update", "title": plan}]) == []


@PROPERTY
@given(text=hostile_text(max_pieces=40), limit=st.integers(min_value=1, max_value=MARKDOWN_LIMIT))
def test_answer_pieces_fit_and_join_to_the_whole_answer_rendered(text: str, limit: int) -> None:
    pieces = list(markdown_pieces(text, limit))
    assert "".join(pieces) == safe_markdown(text)
    assert all(0 < len(p) <= max(limit, 8) for p in pieces)
    for piece in pieces:
        assert_harmless(piece)
        assert validate_chunks([{"type": "markdown_text", "text": piece}]) == [] or not piece


@PROPERTY
@given(
    text=hostile_text(max_pieces=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=6),
)
def test_an_answer_rendered_delta_by_delta_equals_it_rendered_whole(
    text: str, cuts: list[int]
) -> None:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    deltas = [text[a:b] for a, b in itertools.pairwise(points)]
    assert "".join(safe_markdown(d) for d in deltas) == safe_markdown(text)


@PROPERTY
@given(text=hostile_text(max_pieces=30), limit=st.integers(min_value=1, max_value=400))
def test_clamp_keeps_to_its_limit(text: str, limit: int) -> None:
    out = clamp(text, limit)
    assert len(out) <= max(limit, 1)
    assert_harmless(out)


@given(value=st.text(max_size=200))
def test_feedback_values_that_are_not_ours_are_ignored(value: str) -> None:
    parsed = parse_feedback(value)
    if parsed is not None:
        vote, run_id = parsed
        assert value == f"{vote}:{run_id}"


def test_huge_inputs_render_fast_and_small() -> None:
    from core.events import ActionDecided, ObservationReady, RunStarted, StepStarted, ThoughtDelta

    view = RunView()
    view.apply(RunStarted("r", "q" * 100_000, "m", 50))
    for n in range(1, 51):
        view.apply(StepStarted(n, 50))
        view.apply(ThoughtDelta(n, "<!channel> " * 20_000))
        view.apply(ActionDecided(n, "search", "[x](https://evil.example) " * 10_000))
        view.apply(ObservationReady(n, "search", "line\n" * 50_000, False, 0.1, ()))
    tracemalloc.start()
    started = time.process_time()  # CPU time: the work is fixed, the machine's load is not
    chunks = task_chunks(view)
    pieces = list(markdown_pieces("@here " * 200_000))
    seconds = time.process_time() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert validate_chunks(chunks) == []
    assert len(chunks) == 50
    assert all(len(p) <= MARKDOWN_LIMIT for p in pieces)
    assert seconds < 10  # generous: a loaded CI machine; the point is that it ends
    assert peak < 200 * 1024 * 1024


@PROPERTY
@given(text=st.one_of(hostile_text(), st.text(alphabet="&<>]@x", min_size=3_000, max_size=20_000)))
def test_the_plain_fallback_of_a_stream_fits_one_append_and_pings_nobody(text: str) -> None:
    from adapters.slack.streaming import StreamRenderer

    plain = StreamRenderer("run").plain(text)
    assert len(plain.ending) <= MARKDOWN_LIMIT  # one chat.appendStream takes it
    assert not PING.search(plain.ending)
    assert plain.final and plain.fallback is not None
