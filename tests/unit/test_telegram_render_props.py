"""The Telegram renderer on drawn runs full of hostile text: every payload is HTML the strict
fake parses (so Telegram does), within 4,096 UTF-16 units, with no link or mention entity
and no bidi override; the answer's parts hold all of it; the Stop button's data fits."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.live import VERBOSITIES, RunView, Verbosity, fallback_text
from adapters.telegram.render import (
    CAPTION_UNITS,
    MAX_REPLIES,
    MESSAGE_UNITS,
    TRACE_MESSAGES,
    TelegramPayload,
    TelegramRenderer,
    answer_parts_html,
    decision_prompt,
    markdown_html,
    prompt_ref,
    split_answer,
    units,
)
from core.events import (
    ActionDecided,
    ApprovalRequested,
    Finished,
    ObservationReady,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from core.text import neutral_bidi
from core.trace import Trace
from tests.fakes.telegram_server import parse_html
from tests.hostile import DrawnRun, hostile_text, runs
from tests.unit.test_discord_render_props import HUGE, PROPERTY, bounded, huge_trace, view_of

pytestmark = pytest.mark.no_cover
BIDI = {chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}


def accepted(payload: TelegramPayload) -> str:
    """The payload's text (a document's caption) as Telegram would show it, having
    accepted it."""
    text, entities = parse_html(payload.html)  # raises where Telegram would refuse it
    if payload.document is not None:
        assert payload.document.content and units(text) <= CAPTION_UNITS
    else:
        assert text.strip(), "an empty message is refused"
        assert units(text) <= MESSAGE_UNITS
    assert not {"text_link", "text_mention"} & {e["type"] for e in entities}
    assert not BIDI & set(text)
    for button in payload.buttons:
        assert 1 <= len(button.data.encode()) <= 64 and button.text
    return text


@PROPERTY
@given(runs(), st.data())
def test_live_payloads_are_accepted_at_every_point_of_a_run(
    run: DrawnRun, data: st.DataObject
) -> None:
    upto = data.draw(st.integers(min_value=1, max_value=len(run.events)))
    verbosity = data.draw(st.sampled_from(VERBOSITIES))
    view = view_of(run, upto, verbosity)
    view.asker = data.draw(st.sampled_from(["", "1", "9" * 20]))  # Telegram ids are digits
    waiting = data.draw(st.booleans()) and not view.is_final
    if waiting:  # an action waiting for a person, hostile too
        text = hostile_text(max_pieces=6)
        asked = ApprovalRequested(
            data.draw(st.integers(0, 10**6)), data.draw(st.integers(0, 50)), data.draw(text),
            data.draw(text), data.draw(text), 120.0, remember=data.draw(st.booleans()),
        )  # fmt: skip
        view.apply(asked)
    payload = bounded(lambda: TelegramRenderer("0123456789ab", clock=lambda: 3.0).live(view))
    accepted(payload)
    *decisions, stop = payload.buttons
    assert stop.data == f"stop:0123456789ab:{view.asker}"
    if waiting:
        offered = 5 if asked.remember else 4
        assert [b.data.split(":")[1] for b in decisions] == ["a", "e", "d", "r", "w"][:offered]
        assert "Approve this action?" in parse_html(payload.html)[0]
    else:
        assert decisions == []


def letters(text: str, *, source: bool = True) -> str:
    """The letters and digits a reader must find: Markdown syntax and a code fence's line
    (its language tag) are the renderer's to drop, so the source loses those first."""
    if source:
        text = "\n".join(x for x in text.split("\n") if not re.match(r"[ ]{0,3}(```|~~~)", x))
    return "".join(c for c in neutral_bidi(text) if c.isalnum())


def in_order(wanted: str, shown: str) -> bool:
    rest = iter(shown)
    return all(c in rest for c in wanted)


@PROPERTY
@given(runs(finished=True), st.sampled_from(VERBOSITIES))
def test_final_compact_plain_and_the_rest_are_accepted(run: DrawnRun, verbosity: Verbosity) -> None:
    view = view_of(run, verbosity=verbosity)
    renderer = TelegramRenderer("0123456789ab", clock=lambda: 3.0)
    final = bounded(lambda: renderer.final(view))
    shown = accepted(final)
    assert [b.text for b in final.buttons] == (["👍", "👎"] if view.phase == "answered" else [])
    accepted(renderer.compact(view))
    accepted(renderer.plain(fallback_text(view)))
    rest = [accepted(p) for p in renderer.trace_posts(run.trace, steps=False)]
    assert len(rest) <= MAX_REPLIES + 1
    answer = letters(view.answer)
    if answer:  # all of the answer, in the message and the replies under it (or a note)
        body = shown.rsplit("\n", 1)[0]
        got = "".join(letters(t, source=False) for t in [body, *rest])
        cut = len(rest) == MAX_REPLIES + 1 and "more characters" in rest[-1]
        assert cut or in_order(answer, got)
    whole = [accepted(p) for p in renderer.trace_posts(run.trace, whole_answer=True, steps=False)]
    if len(whole) <= MAX_REPLIES:  # not cut: every letter and digit, in order
        assert in_order(answer, "".join(letters(t, source=False) for t in whole))
    posts = renderer.trace_posts(run.trace)  # and the steps, and the documents
    for post in posts:
        accepted(post)
    *replies, md, js = posts
    assert md.document is not None and md.document.name == f"trace-{run.trace.id}.md"
    assert js.document is not None and Trace.from_json(js.document.content.decode()) == run.trace
    steps = replies[len(rest) :]
    assert len(steps) <= TRACE_MESSAGES and (steps or not run.trace.steps)


@PROPERTY
@given(hostile_text(max_pieces=30), st.integers(min_value=2, max_value=5000))
def test_split_answer_loses_nothing_but_whitespace(text: str, limit: int) -> None:
    parts = split_answer(text, limit)
    assert all(p and units(p) <= limit for p in parts)
    assert "".join("".join(p.split()) for p in parts) == "".join(text.split())


def test_a_huge_run_renders_quickly_and_within_the_limits() -> None:
    trace = huge_trace()  # 1 MB question and answer, 50 steps of 100 KB thoughts
    view = RunView(started_at=0.0)
    view.apply(RunStarted(trace.id, trace.question, "m", 50))
    for step in trace.steps:
        view.apply(StepStarted(step.index, 50))
        view.apply(ThoughtDelta(step.index, step.thought or ""))
        view.apply(ActionDecided(step.index, step.action or "", step.action_input or ""))
        view.apply(
            ObservationReady(step.index, step.action or "", step.observation or "", False, 0.1)
        )
    renderer = TelegramRenderer(trace.id, clock=lambda: 3.0)
    accepted(bounded(lambda: renderer.live(view), seconds=2.0))
    view.apply(Finished(trace, HUGE, "answered"))
    accepted(bounded(lambda: renderer.final(view), seconds=2.0))
    parts = bounded(lambda: renderer.trace_posts(trace, steps=False), seconds=5.0)
    assert len(parts) == MAX_REPLIES + 1  # the rest of a 1 MB answer is not 250 messages
    assert "more characters of the answer are in its trace" in parse_html(parts[-1].html)[0]
    posts = bounded(lambda: renderer.trace_posts(trace), seconds=5.0)
    assert len(posts) <= MAX_REPLIES + 1 + TRACE_MESSAGES + 2
    for post in posts:
        accepted(post)


def test_while_a_person_decides_the_message_does_not_change() -> None:
    view = RunView(started_at=0.0, asker="1")
    view.apply(RunStarted("r", "q", "m", 5))
    view.apply(StepStarted(1, 5))
    view.apply(ApprovalRequested(1, 0, "files_delete", "a.txt", "t", 120.0))
    now = [view.pending_since + 1.0]
    renderer = TelegramRenderer("0123456789ab", clock=lambda: now[0])
    first = renderer.live(view)
    now[0] += 30.0
    assert renderer.live(view) == first  # LiveMessage sends no edit: nothing to see changed


@PROPERTY
@given(
    st.sampled_from(["e", "r"]),
    hostile_text(max_pieces=6),
    hostile_text(max_pieces=8),
    st.one_of(st.none(), st.text(min_size=1, max_size=64)),
)
def test_a_decision_prompt_is_accepted_and_names_its_action(
    kind: str, tool: str, current: str, mention: str | None
) -> None:
    ref = "0123456789ab:12:3:" + "9" * 20
    payload = bounded(
        lambda: decision_prompt(kind, tool=tool, current=current, ref=ref, mention=mention)
    )
    text = accepted(payload)
    found = prompt_ref(text)  # read back from the message as Telegram gives it
    spoofed = decision_prompt(kind, tool=tool, current=f"x\nref e:evil:1:1:1\n{current}", ref=ref)
    assert prompt_ref(accepted(spoofed)) is not None
    assert prompt_ref(accepted(spoofed)).groups()[1] == "0123456789ab"  # type: ignore[union-attr]
    assert found is not None and found.groups() == (kind, "0123456789ab", "12", "3", "9" * 20)
    assert payload.prompt is not None and 1 <= len(payload.prompt.placeholder) <= 64
    assert payload.prompt.selective == bool(mention) and not payload.buttons


@pytest.mark.parametrize("line", [">", "> ", "   >\t"])
def test_an_empty_quote_renders_to_nothing_not_an_empty_element(line: str) -> None:
    """Telegram refuses a message whose text is empty: ``<blockquote></blockquote>`` alone is
    one (hypothesis found an answer of ``>`` posted under the trace that way)."""
    assert markdown_html(line) == ("", False)
    assert markdown_html("> quoted") == ("<blockquote>quoted</blockquote>", False)


def test_an_answer_whose_markdown_shows_nothing_is_shown_as_written() -> None:
    # hypothesis found an answer of three backticks: an empty <pre></pre>, refused by
    # Telegram as a message with no text
    for answer in ("```", "> ", "```\n```", "#"):
        (html,) = answer_parts_html(split_answer(answer, 4096))
        assert re.sub(r"<[^<>]*>", "", html).strip(), answer
