"""The Slack renderer: pure functions of RunView / Trace, checked against Slack's limits."""

from __future__ import annotations

import json

from adapters.live import RunView
from adapters.slack.render import (
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    OBSERVATION_PARTS,
    SECTION_LIMIT,
    SHUTDOWN,
    STOP_ACTION_ID,
    SlackMessage,
    SlackRenderer,
    block_size,
    escape,
    parse_stop_value,
    shorten,
    trace_posts,
)
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
from core.trace import Trace, TraceStep

CLOCK = lambda: 1000.0  # noqa: E731 - a fixed clock keeps elapsed seconds stable


def view_with(*events: object, asker: str = "U1ADA") -> RunView:
    view = RunView(question="What is 17*23?", asker=asker, started_at=995.8)
    for event in events:
        view.apply(event)  # type: ignore[arg-type]
    return view


def all_text(message: SlackMessage) -> str:
    return json.dumps(message.kwargs(), ensure_ascii=False)


def texts(message: SlackMessage) -> list[str]:
    out = []
    for block in message.blocks:
        if isinstance(block.get("text"), dict):
            out.append(block["text"]["text"])
        out += [e["text"] for e in block.get("elements", ()) if "text" in e]
    return out


def within_limits(message: SlackMessage) -> None:
    assert len(message.blocks) <= MAX_BLOCKS
    assert message.size <= MESSAGE_BUDGET + 200
    assert all(len(t) <= SECTION_LIMIT for t in texts(message))


def started() -> list[object]:
    return [RunStarted("run123", "What is 17*23?", "m", 8), StepStarted(1, 8)]


def test_live_message_restates_question_status_and_stop_button() -> None:
    view = view_with(*started(), ThoughtDelta(1, "This is arithmetic."))
    message = SlackRenderer(run_id="run123", clock=CLOCK).live(view)
    first, status = message.blocks[0], message.blocks[1]
    assert first["text"]["text"] == "*<@U1ADA> asked:* What is 17*23?"
    assert "step 1/8" in status["text"]["text"] and "thinking" in status["text"]["text"]
    assert "4.2 s" in status["text"]["text"]
    assert status["accessory"]["action_id"] == STOP_ACTION_ID
    assert status["accessory"]["value"] == "run123:U1ADA"
    assert parse_stop_value(status["accessory"]["value"]) == ("run123", "U1ADA")
    assert parse_stop_value("run123") == ("run123", None)
    thought = message.blocks[2]
    assert (
        thought["type"] == "context"
        and "*Thought:* This is arithmetic." in thought["elements"][0]["text"]
    )
    within_limits(message)


def test_action_bold_observation_quoted_and_folded() -> None:
    long_observation = "\n".join(f"line {i}" for i in range(10))
    view = view_with(
        *started(),
        ThoughtDelta(1, "Use the calculator."),
        ActionDecided(1, "calculate", "17*23"),
        ObservationReady(1, "calculate", long_observation),
    )
    body = "\n".join(texts(SlackRenderer(run_id="r", clock=CLOCK).live(view)))
    assert "*Action:* `calculate[17*23]`" in body
    assert "&gt; line 0\n&gt; line 1\n&gt; line 2" in body and "line 5" not in body
    assert "more" in body or "chars" in body


def test_finished_steps_shrink_to_grey_lines_and_status_says_what_happens() -> None:
    view = view_with(
        *started(),
        ActionDecided(1, "search", "Tokyo population"),
        ObservationReady(1, "search", "3 results\nmore"),
        StepStarted(2, 8),
        ActionDecided(2, "calculate", "1+1"),
    )
    message = SlackRenderer(run_id="r", clock=CLOCK).live(view)
    assert message.blocks[2]["type"] == "context"
    assert message.blocks[2]["elements"][0]["text"] == "1 · *search* `Tokyo population` → 3 results"
    assert "calculating" in message.blocks[1]["text"]["text"]


def test_model_text_cannot_ping() -> None:
    hostile = "<!channel> <!here> <@U999> & <https://x.test|click>"
    view = view_with(*started(), ThoughtDelta(1, hostile), AnswerDelta(1, hostile))
    view.question = hostile
    for message in (
        SlackRenderer(run_id="r", clock=CLOCK).live(view),
        SlackRenderer(clock=CLOCK).final(
            view_with(*started(), Finished(_trace(hostile), hostile, "answered"))
        ),
    ):
        body = all_text(message)
        assert "<!channel>" not in body and "<!here>" not in body and "<@U999>" not in body
        assert "&lt;!channel&gt;" in body
    for post in trace_posts(_trace(hostile)):
        assert "<!channel>" not in all_text(post)


def test_many_steps_collapse_earlier_ones_within_limits() -> None:
    events: list[object] = [RunStarted("r", "q", "m", 50)]
    for n in range(1, 49):
        events += [
            StepStarted(n, 50),
            ThoughtDelta(n, "x" * 500),
            ActionDecided(n, "search", "y" * 200),
            ObservationReady(n, "search", "z" * 3000),
        ]
    events += [StepStarted(49, 50), ThoughtDelta(49, "t" * 5000)]
    message = SlackRenderer(run_id="r", clock=CLOCK).live(view_with(*events))
    within_limits(message)
    body = "\n".join(texts(message))
    assert "earlier steps" in body
    assert "48 · *search*" in body  # the newest finished step is kept


def test_long_answer_goes_on_in_the_thread() -> None:
    answer = "word " * 2000
    trace = _trace("q", answer=answer)
    view = view_with(*started(), Finished(trace, answer, "answered"))
    message = SlackRenderer(clock=CLOCK).final(view)
    within_limits(message)
    assert "continued in the thread" in all_text(message)
    posts = trace_posts(trace)
    continued = [p for p in posts if "*Answer*" in all_text(p)]
    assert continued
    assert sum(all_text(p).count("word") for p in continued) == 2000
    for post in posts:
        within_limits(post)


def test_final_answer_sources_totals_and_no_stop_button() -> None:
    trace = _trace("q", answer="391", sources=["https://www.example.org/a"])
    message = SlackRenderer(run_id="r", clock=CLOCK).final(
        view_with(*started(), Finished(trace, "391", "answered"))
    )
    body = all_text(message)
    assert STOP_ACTION_ID not in body
    assert message.blocks[1]["text"]["text"] == "391"
    assert "<https://www.example.org/a|example.org>" in body
    assert "2 steps" in body and "1.5 s" in body and "30 tokens" in body


def test_failure_states() -> None:
    trace = _trace("q")
    failed = SlackRenderer(clock=CLOCK).final(
        view_with(
            *started(),
            Failed(trace, "The model sent nothing for 60 s (provider timeout).", "timeout"),
        )
    )
    assert ":x: The model sent nothing for 60 s (provider timeout)." in all_text(failed)
    stopped = SlackRenderer(clock=CLOCK).final(view_with(*started(), Cancelled(trace, by="U2BOB")))
    assert "Stopped by <@U2BOB> after step 1." in all_text(stopped)
    shutdown = SlackRenderer(clock=CLOCK).final(
        view_with(*started(), Cancelled(trace, by=SHUTDOWN))
    )
    assert "restarting" in all_text(shutdown)
    best = SlackRenderer(clock=CLOCK).final(
        view_with(*started(), Finished(trace, "maybe 4", "best_effort"))
    )
    assert "Stopped after 8 steps without a final answer" in all_text(best)
    raw = SlackRenderer(clock=CLOCK).final(
        view_with(*started(), Finished(trace, "blah", "unformatted"))
    )
    assert "did not follow the format" in all_text(raw)


def test_trace_posts_question_steps_totals() -> None:
    posts = trace_posts(_trace("What?", answer="4"))
    assert "*Question*" in all_text(posts[0])
    assert "*Step 1*" in all_text(posts[1]) and "```" in all_text(posts[1])
    assert "*Totals*" in all_text(posts[-1])


def test_long_observation_is_split_into_code_blocks_and_the_rest_pointed_to() -> None:
    trace = _trace("q")
    trace.steps[0].observation = "\n".join("o" * 99 for _ in range(200))  # ~20k chars
    posts = trace_posts(trace)
    parts = [t for p in posts for t in texts(p) if t.startswith("*Observation:* (part ")]
    assert len(parts) == OBSERVATION_PARTS >= 2
    shown = sum(t.count("o" * 99) for t in parts)
    rest = f"{20_000 - 1 - shown * 100:,} more characters are in the stored trace"
    assert any(
        rest in t and f"reactbot trace show {trace.id}" in t for p in posts for t in texts(p)
    )
    for post in posts:
        within_limits(post)
        for text in texts(post):
            assert text.count("```") % 2 == 0


def test_shorten_makes_a_message_smaller() -> None:
    events: list[object] = [RunStarted("r", "q", "m", 8)]
    for n in range(1, 8):
        events += [
            StepStarted(n, 8),
            ActionDecided(n, "search", "a"),
            ObservationReady(n, "search", "b"),
        ]
    message = SlackRenderer(run_id="r", clock=CLOCK).live(view_with(*events))
    short = shorten(message)
    assert len(short.blocks) < len(message.blocks)
    assert short.size <= message.size
    assert sum(block_size(b) for b in short.blocks) == short.size


def test_escape() -> None:
    assert escape("a & <b>") == "a &amp; &lt;b&gt;"


def _trace(question: str, *, answer: str = "4", sources: list[str] | None = None) -> Trace:
    trace = Trace(question=question, user="U1ADA", started_at=10.0, ended_at=11.5, models=["m"])
    trace.steps = [
        TraceStep(
            1,
            thought=question,
            action="calculate",
            action_input="2+2",
            observation=question,
            started_at=10.0,
            ended_at=10.5,
            prompt_tokens=10,
            completion_tokens=5,
            sources=sources or [],
        ),
        TraceStep(
            2, thought="done", started_at=10.5, ended_at=11.5, prompt_tokens=10, completion_tokens=5
        ),
    ]
    trace.answer, trace.status = answer, "answered"
    return trace


def test_memory_unavailable_is_said_in_the_final_totals() -> None:
    trace = _trace("q", answer="391")
    notice = Notice("memory", "memory unavailable: answering without the conversation's history")
    message = SlackRenderer(run_id="r", clock=CLOCK).final(
        view_with(*started(), notice, Finished(trace, "391", "answered"))
    )
    assert ":warning: memory unavailable" in all_text(message)


def test_an_answer_cut_inside_a_code_block_closes_it_before_the_note() -> None:
    answer = "Here is the code:\n```python\n" + "print('hi')\n" * 400 + "```"
    trace = _trace("q", answer=answer)
    message = SlackRenderer(clock=CLOCK).final(
        view_with(*started(), Finished(trace, answer, "answered"))
    )
    text = message.blocks[1]["text"]["text"]
    code, closing, after = text.rpartition("```")
    assert code.count("```") == 1 and closing
    assert "continued in the thread" in after, "the note is not swallowed by the code block"
    posts = trace_posts(trace)
    parts = [t for p in posts for t in texts(p) if t.startswith("*Answer* (part ")]
    assert len(parts) >= 2
    assert all(t.count("```") == 2 for t in parts), "each part opens and closes its code block"
