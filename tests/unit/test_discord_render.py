"""The Discord renderer is a pure function of the run's state: tested without Discord."""

from __future__ import annotations

import json

import pytest

from adapters.discord.render import (
    CONTENT_LIMIT,
    FENCE,
    DiscordRenderer,
    answer_overflow,
    render_live,
    sanitize,
    split_text,
    tail,
    thread_name,
)
from adapters.live import RunView
from core.events import (
    ActionDecided,
    AnswerDelta,
    Cancelled,
    Failed,
    Finished,
    Notice,
    ObservationReady,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from core.tools import ToolDisplay
from core.trace import Trace, TraceStep


def view_with(*events: object, start: float = 100.0) -> RunView:
    view = RunView(started_at=start)
    for event in events:
        view.apply(event)  # type: ignore[arg-type]
    return view


def started(max_steps: int = 8) -> list[object]:
    return [RunStarted("r1", "What is 17*23+4?", "scripted", max_steps), StepStarted(1, max_steps)]


def finished_trace(answer: str = "395", *, steps: int = 2, status: str = "answered") -> Trace:
    trace = Trace(question="What is 17*23+4?", user="ada", models=["scripted"])
    trace.started_at, trace.ended_at = 10.0, 16.1
    for i in range(1, steps):
        trace.steps.append(
            TraceStep(
                i,
                thought="arithmetic",
                action="calculate",
                action_input="17*23+4",
                observation="395",
                started_at=10.0,
                ended_at=11.0,
                prompt_tokens=500,
                completion_tokens=120,
            )
        )
    trace.steps.append(TraceStep(steps, thought="done", started_at=11, ended_at=12))
    trace.answer, trace.status = answer, status  # type: ignore[assignment]
    return trace


def test_status_line_says_step_elapsed_and_what_happens() -> None:
    view = view_with(*started(), ThoughtDelta(1, "I will use the calculator"))
    text = render_live(view, now=103.4)
    first = text.splitlines()[0]
    assert first == "🤔 Thinking · step 1/8 · 3.4 s"
    assert "**Thought** I will use the calculator▍" in text


@pytest.mark.parametrize(
    ("tool", "display", "label"),
    [
        ("search", ToolDisplay("🔎", "Searching"), "🔎 Searching"),
        ("other", None, "🛠️ Running `other`"),
        ("`x`@everyone", None, "🛠️ Running `ˋxˋ@\u200beveryone`"),  # cannot ping or break out
    ],
)
def test_status_says_the_tool_at_work_in_its_own_words(
    tool: str, display: ToolDisplay | None, label: str
) -> None:
    decided = ActionDecided(1, tool, "x", display=display)
    view = view_with(*started(), ThoughtDelta(1, "t"), decided)
    assert label in render_live(view, now=101)


def test_waiting_and_retrying_notices_show_in_the_status() -> None:
    waiting = view_with(RunStarted("r", "q", "m", 8), Notice("waiting", "waiting"))
    assert "Waiting for the previous question" in render_live(waiting, now=100)
    retry = view_with(*started(), Notice("retrying", "rate limited; retrying in 2 s"))
    assert "Retrying after a rate limit" in render_live(retry, now=100)


def test_finished_steps_collapse_to_subtext_and_current_step_shows_action_and_quote() -> None:
    view = view_with(
        *started(),
        ThoughtDelta(1, "search first"),
        ActionDecided(1, "search", "2022 final"),
        ObservationReady(1, "search", "3 results\nArgentina won\nMessi scored twice\nmore"),
        StepStarted(2, 8),
        ThoughtDelta(2, "now compute"),
        ActionDecided(2, "calculate", "2+1"),
        ObservationReady(2, "calculate", "3\n4\n5\n6\n7"),
    )
    text = render_live(view, now=101)
    assert "-# 1 · search `2022 final` → 3 results" in text
    assert "-# 2 · calculate `2+1` → 3" in text
    view.apply(StepStarted(3, 8))
    view.apply(ThoughtDelta(3, "check"))
    view.apply(ActionDecided(3, "search", "x"))
    view.apply(ObservationReady(3, "search", "a\nb\nc\nd\ne"))
    view.apply(StepStarted(4, 8))
    view.apply(ActionDecided(4, "search", "y"))
    text = render_live(view, now=101)
    assert "**Action** `search` `y`" in text


def test_current_observation_is_quoted_and_folded_to_three_lines() -> None:
    view = view_with(*started(), ActionDecided(1, "search", "q"))
    view.steps[-1].observation = "l1\nl2\nl3\nl4\nl5"  # shown while the next step starts
    from adapters.discord.render import fold_quote

    folded = fold_quote("l1\nl2\nl3\nl4\nl5")
    assert folded.splitlines()[:3] == ["> l1", "> l2", "> l3"]
    assert "2 more lines" in folded


def test_long_runs_keep_latest_steps_and_collapse_earlier_ones() -> None:
    events: list[object] = [RunStarted("r", "q", "m", 50)]
    for n in range(1, 41):
        events += [
            StepStarted(n, 50),
            ThoughtDelta(n, "thinking " * 5),
            ActionDecided(n, "search", f"query number {n} " + "x" * 30),
            ObservationReady(n, "search", "result " * 20),
        ]
    events += [StepStarted(41, 50), ThoughtDelta(41, "the latest thought " * 30)]
    view = view_with(*events)
    text = render_live(view, now=101)
    assert len(text) <= CONTENT_LIMIT
    assert "earlier steps" in text
    assert "-# 40 · search" in text
    assert "-# 1 · search" not in text
    assert text.rstrip().endswith("▍")


def test_a_huge_thought_keeps_its_tail_and_never_leaves_a_code_block_open() -> None:
    thought = "intro\n" + FENCE + "python\n" + "x = 1\n" * 600 + "still in code"
    view = view_with(*started(), ThoughtDelta(1, thought))
    text = render_live(view, now=101)
    assert len(text) <= CONTENT_LIMIT
    assert "still in code" in text
    assert text.count(FENCE) % 2 == 0


def test_tail_reopens_a_block_the_cut_fell_inside() -> None:
    text = "a\n```\n" + "code line\n" * 100 + "```\nafter"
    cut = tail(text, 300)
    assert cut.count(FENCE) % 2 == 0
    assert cut.index(FENCE) < cut.index("code line")


def test_split_text_respects_the_limit_and_code_blocks() -> None:
    text = "para\n" * 50 + "```py\n" + "print(1)\n" * 400 + "```\nend"
    parts = split_text(text, 2000)
    assert len(parts) > 1
    assert all(len(p) <= 2000 for p in parts)
    for part in parts:
        assert part.count(FENCE) % 2 == 0
    assert parts[-1].endswith("end")
    assert "".join(parts).count("print(1)") == 400


def test_split_text_splits_a_single_giant_line() -> None:
    parts = split_text("y" * 5000, 2000)
    assert all(len(p) <= 2000 for p in parts)
    assert sum(len(p) for p in parts) == 5000


def test_mentions_in_model_text_are_defused() -> None:
    assert sanitize("@everyone @here <@123456789012345678> <@&123456789012345678>") == (
        "@\u200beveryone @\u200bhere <@\u200b123456789012345678> <@\u200b&123456789012345678>"
    )
    view = view_with(*started(), ThoughtDelta(1, "ping @everyone"))
    assert "@everyone" not in render_live(view, now=101)


def test_final_answer_with_sources_and_footer() -> None:
    trace = finished_trace("Messi scored twice (fifa.com).")
    trace.cited = ["https://www.fifa.com/final", "https://en.wikipedia.org/wiki/x"]
    view = view_with(*started(), Finished(trace, trace.answer or "", "answered"))
    payload = DiscordRenderer().final(view)
    lines = payload.content.splitlines()
    assert lines[0] == "Messi scored twice (fifa.com)."
    assert lines[1] == (
        "Sources: [fifa.com](<https://www.fifa.com/final>), "
        "[en.wikipedia.org](<https://en.wikipedia.org/wiki/x>)"
    )
    assert lines[2] == (
        "-# ✅ 2 steps · 6.1 s · 620 tokens · text mode · `scripted` · trace in thread ↓"
    )
    assert payload.stop_button == "remove"
    trace.models, trace.persona = ["gpt-x @everyone", "big`one"], "Talk like a pirate."
    footer = DiscordRenderer().final(view).content.splitlines()[2]
    assert "`gpt-x @\u200beveryone` · `bigˋone` · channel persona" in footer
    assert payload.thread_name == "Trace: What is 17*23+4?"


def test_failure_cancel_best_effort_and_unformatted_states() -> None:
    trace = finished_trace()
    failed = view_with(*started(), Failed(trace, "The model sent nothing for 60 s.", "timeout"))
    assert (
        DiscordRenderer()
        .final(failed)
        .content.startswith("❌ The model sent nothing for 60 s. Nothing was lost; ask again.")
    )
    cancelled = view_with(*started(), Cancelled(trace, "ada"))
    assert DiscordRenderer().final(cancelled).content.startswith("⏹️ Stopped by ada after step 2.")
    best = view_with(*started(), Finished(trace, "probably 3", "best_effort"))
    assert "⚠️ Stopped after 8 steps without a final answer" in DiscordRenderer().final(best).content
    raw = view_with(*started(), Finished(trace, "free text", "unformatted"))
    assert "did not follow the format" in DiscordRenderer().final(raw).content


def test_a_long_answer_is_split_and_the_rest_goes_first_in_the_thread() -> None:
    answer = "\n".join(f"line {i} " + "word " * 12 for i in range(120))
    trace = finished_trace(answer)
    view = view_with(*started(), Finished(trace, answer, "answered"))
    renderer = DiscordRenderer()
    final = renderer.final(view)
    assert len(final.content) <= CONTENT_LIMIT
    assert "goes on in the thread" in final.content
    posts = renderer.trace_posts(trace)
    overflow = answer_overflow(trace)
    assert overflow and [p.content for p in posts[: len(overflow)]] == overflow
    shown = final.content.split("\n-# (the answer")[0] + "\n" + "\n".join(overflow)
    assert shown == answer.strip()


def test_trace_posts_hold_question_steps_totals_and_json() -> None:
    trace = finished_trace("395")
    posts = DiscordRenderer().trace_posts(trace)
    assert posts[0].content.startswith("**Question** What is 17*23+4?")
    step = posts[1].content
    assert step.startswith("**Step 1** · 1.00 s · 620 tokens")
    assert "**Thought** arithmetic" in step
    assert "**Action** `calculate` `17*23+4`" in step
    assert "```\n395\n```" in step
    totals = posts[-1]
    assert totals.content.startswith("**Totals** ✅ answered · 2 steps · 6.1 s")
    (file,) = totals.files
    assert file.name == f"trace-{trace.id}.json"
    assert json.loads(file.data)["answer"] == "395"
    assert all(len(p.content) <= CONTENT_LIMIT for p in posts)


def test_a_long_observation_is_attached_as_markdown() -> None:
    trace = finished_trace()
    trace.steps[0].observation = "data ```with fences``` " * 400
    posts = DiscordRenderer().trace_posts(trace)
    step_post = next(p for p in posts if p.content.startswith("**Step 1**"))
    assert "**Observation** attached" in step_post.content
    assert step_post.files[0].name == "step-1-observation.md"


def test_trace_records_who_stopped() -> None:
    trace = finished_trace(status="cancelled")
    trace.stopped_by = "ada @everyone"
    totals = DiscordRenderer().trace_posts(trace)[-1].content
    assert "Stopped by ada @\u200beveryone" in totals


def test_thread_name_is_short() -> None:
    assert len(thread_name("why " * 100)) <= 100


def test_answering_shows_the_answer_growing() -> None:
    view = view_with(*started(), ThoughtDelta(1, "done"), AnswerDelta(1, "It is 3"))
    text = render_live(view, now=101)
    assert "✍️ Writing the answer" in text
    assert "**Answer** It is 3▍" in text


def test_memory_unavailable_is_said_live_and_in_the_final_footer() -> None:
    notice = Notice("memory", "memory unavailable: answering without the conversation's history")
    live = render_live(view_with(*started(), notice), now=101.0)
    assert "⚠️ memory unavailable" in live
    trace = finished_trace()
    view = view_with(*started(), notice, Finished(trace, "395", "answered"))
    footer_line = DiscordRenderer().final(view).content.splitlines()[-1]
    assert "⚠️ memory unavailable" in footer_line


def test_a_refusal_is_shown_as_the_answer_and_the_footer_says_so() -> None:
    trace = finished_trace("I can't help with that.", status="refused")
    trace.cited = ["https://www.fifa.com/final"]
    view = view_with(*started(), Finished(trace, trace.answer or "", "refused"))
    lines = DiscordRenderer().final(view).content.splitlines()
    assert lines[0] == "I can't help with that."
    assert lines[1].startswith("-# 🚫 2 steps · the model declined to answer · 6.1 s")
    assert len(lines) == 2  # no sources line: nothing was answered from them
