"""The Slack renderer: pure functions of RunView / Trace, checked against Slack's limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.live import RunView
from adapters.slack.approval import (
    ALWAYS_ACTION_ID,
    APPROVE_ACTION_ID,
    DENY_ACTION_ID,
    EDIT_ACTION_ID,
    ApprovalRef,
    parse_button_value,
)
from adapters.slack.blocks import (
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    SECTION_LIMIT,
    STOP_ACTION_ID,
    SlackMessage,
    block_size,
    parse_stop_value,
)
from adapters.slack.markdown import escape
from adapters.slack.render import SlackRenderer
from adapters.slack.trace_thread import OBSERVATION_PARTS, shorten, trace_posts
from adapters.words import SHUTDOWN
from core.events import (
    ActionDecided,
    AnswerDelta,
    ApprovalDecided,
    ApprovalRequested,
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
from core.trace import ApprovalRecord, Trace, TraceStep

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
        ActionDecided(2, "calculate", "1+1", display=ToolDisplay("🧮", "Calculating")),
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
    assert "Stopped by <@U2BOB> after step 2." in all_text(stopped)  # as its "2 steps"
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


# ---- approvals ------------------------------------------------------------------------------

THOUGHT = "The user asked me to delete the draft; the tool can do it."
PATH = '{"path": "drafts/q3.md"}'


def pending_view(
    *, remember: bool = True, text: str = PATH, call: int = 0, approvers: str = "asker"
) -> RunView:
    view = view_with(
        *started(),
        ThoughtDelta(1, THOUGHT),
        ActionDecided(1, "files_delete", text, call),
        ApprovalRequested(1, call, "files_delete", text, THOUGHT, 300.0, True, remember),
    )
    view.pending_since = 996.0  # 4 s before CLOCK
    view.approvers = approvers
    return view


def approval_renderer(**options: Any) -> SlackRenderer:
    return SlackRenderer(run_id="run123", clock=CLOCK, approval_timeout=300.0, **options)


def test_a_pending_action_shows_thought_tool_input_who_decides_and_the_buttons() -> None:
    message = approval_renderer().live(pending_view())
    within_limits(message)
    status = message.blocks[1]["text"]["text"]
    assert status == ":raised_hand: step 1/8 · waiting for approval · 0.2 s"
    assert message.text == "What is 17*23? — waiting for approval"
    shown = texts(message)
    assert f"*Thought:* {THOUGHT}" in shown
    assert f"*Action:* *files_delete*\n```\n{PATH}\n```" in shown
    assert "only <@U1ADA> or an admin can decide · denied automatically in 5 min" in shown
    (actions,) = [b for b in message.blocks if b["type"] == "actions"]
    labels = [(e["text"]["text"], e["action_id"], e.get("style")) for e in actions["elements"]]
    assert labels == [
        ("✅ Approve", APPROVE_ACTION_ID, "primary"),
        ("✏️ Edit…", EDIT_ACTION_ID, None),
        ("❌ Deny", DENY_ACTION_ID, "danger"),
        ("♾️ Allow in this conversation", ALWAYS_ACTION_ID, None),
    ]  # the shared words (adapters.words.BUTTONS)
    refs = {parse_button_value(e["value"]) for e in actions["elements"]}
    assert refs == {ApprovalRef("run123", 1, 0, "U1ADA")}, "each button says which action"
    assert message.blocks[1]["accessory"]["action_id"] == STOP_ACTION_ID, "Stop still works"


def test_the_waiting_message_changes_rarely_while_a_person_decides() -> None:
    view = pending_view()
    seen = set()
    for second in range(0, 300, 5):
        clock = lambda s=second: 996.0 + s  # noqa: E731
        seen.add(json.dumps(SlackRenderer(run_id="run123", clock=clock).live(view).blocks))
    # 5, 4, 3 and 2 min, then 120, 105, ... 15 s and "a few seconds": 14 edits in 5 minutes
    assert len(seen) <= 14, "a minute apart until the last two, then every 15 s"
    late = SlackRenderer(run_id="run123", clock=lambda: 996.0 + 285).live(view)
    assert "denied automatically in 15 s" in str(late.blocks)
    assert "· 0.2 s" in late.blocks[1]["text"]["text"], "the seconds stand still"


def test_who_may_decide_follows_the_policy_and_no_allow_button_without_remember() -> None:
    admins = approval_renderer().live(pending_view(remember=False, approvers="admins"))
    assert "only an admin can decide" in str(admins.blocks)
    assert ALWAYS_ACTION_ID not in json.dumps(admins.blocks)
    anyone = approval_renderer().live(pending_view(approvers="anyone"))
    assert "anyone here can decide" in str(anyone.blocks)
    nobody = approval_renderer(approvals=False).live(pending_view())
    assert "waiting for a decision" in str(nobody.blocks)
    assert not [b for b in nobody.blocks if b["type"] == "actions"]


def test_an_input_too_long_for_the_edit_field_is_not_offered_for_editing() -> None:
    fits = approval_renderer().live(pending_view(text="x" * 3000))
    assert EDIT_ACTION_ID in json.dumps(fits.blocks)
    message = approval_renderer().live(pending_view(text="x" * 3001))
    within_limits(message)
    ids = [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]
    assert ids == [APPROVE_ACTION_ID, DENY_ACTION_ID, ALWAYS_ACTION_ID]
    assert "…" in str(message.blocks), "the input is cut in the message"


def test_a_further_call_of_the_step_is_named() -> None:
    message = approval_renderer().live(pending_view(call=1))
    assert "*Action:* *files_delete* (call 2 of this step)" in str(message.blocks)
    (actions,) = [b for b in message.blocks if b["type"] == "actions"]
    ref = parse_button_value(actions["elements"][0]["value"])
    assert ref is not None and ref.key == ("run123", 1, 1)


DECISIONS = [
    (ApprovalDecided(1, 0, "approved", "U2BOB", PATH), "✅ approved by <@U2BOB>"),
    (
        ApprovalDecided(1, 0, "approved", "U2BOB", PATH, remembered=True),
        "✅ approved by <@U2BOB>, and allowed for the rest of the conversation",
    ),
    (ApprovalDecided(1, 0, "edited", "U2BOB", '{"path": "old.md"}'), "✏️ edited by <@U2BOB>"),
    (
        ApprovalDecided(1, 0, "denied", "U2BOB", PATH, "not <!here> that one"),
        '🚫 denied by <@U2BOB>: "not &lt;!here&gt; that one"',
    ),
    (ApprovalDecided(1, 0, "timeout", None, PATH), "⌛ no decision in 5 min: denied"),
    (
        ApprovalDecided(1, 0, "allowed", "U2BOB", PATH),
        "✅ allowed for this conversation by <@U2BOB>",
    ),
]


@pytest.mark.parametrize(("event", "line"), DECISIONS, ids=[d[0].outcome for d in DECISIONS])
def test_after_a_decision_the_buttons_go_and_the_step_says_it(
    event: ApprovalDecided, line: str
) -> None:
    view = pending_view()
    view.apply(event)
    message = approval_renderer().live(view)
    within_limits(message)
    assert line in texts(message)
    assert not [b for b in message.blocks if b["type"] == "actions"]
    assert "waiting for approval" not in message.blocks[1]["text"]["text"]


def test_decided_steps_say_so_in_their_line_and_in_the_final_message() -> None:
    view = pending_view()
    view.apply(ApprovalDecided(1, 0, "denied", "U2BOB", PATH, "not that one"))
    view.apply(ObservationReady(1, "files_delete", "The user denied this action.", True))
    view.apply(StepStarted(2, 8))
    live = approval_renderer().live(view)
    assert (
        '1 · *files_delete* `{"path": "drafts/q3.md"}` 🚫 denied by <@U2BOB> → :warning: '
        "The user denied this action."
    ) in texts(live)
    trace = Trace(question="q", steps=[TraceStep(1, action="files_delete", action_input=PATH)])
    view.apply(Finished(trace, "I did not delete it.", "answered"))
    final = approval_renderer().final(view)
    within_limits(final)
    assert 'Approvals: 1 · *files_delete* 🚫 denied by <@U2BOB>: "not that one"' in texts(final)


def test_the_thread_shows_the_decision_under_the_step() -> None:
    edited = ApprovalRecord("edited", "U2BOB", 1.0, '{"path": "<!here>"}', "typo")
    timed_out = ApprovalRecord("timeout")
    trace = Trace(
        question="q",
        user="U1ADA",
        steps=[
            TraceStep(
                1, action="files_delete", action_input="{}", observation="ok", approval=edited
            ),
            TraceStep(
                2, action="files_delete", action_input="{}", observation="no", approval=timed_out
            ),
        ],
    )
    posts = approval_renderer().trace_posts(trace)
    lines = [t for p in posts for t in texts(p) if t.startswith("*Approval:*")]
    assert lines == [
        '*Approval:* ✏️ edited by <@U2BOB> (the model wrote: {"path": "&lt;!here&gt;"}): "typo"',
        "*Approval:* ⌛ no decision in 5 min: denied",
    ]
    plain = SlackRenderer(clock=CLOCK).trace_posts(trace)  # no timeout known: describe()'s words
    assert "⌛ no decision in time: denied" in str([p.blocks for p in plain])


def test_a_refusal_is_shown_as_the_answer_and_the_totals_say_so() -> None:
    trace = _trace("q", answer="I can't help with that.")
    trace.status = "refused"
    message = SlackRenderer(run_id="r", clock=CLOCK).final(
        view_with(*started(), Finished(trace, "I can't help with that.", "refused"))
    )
    assert message.blocks[1]["text"]["text"] == "I can't help with that."
    assert ":no_entry_sign: 2 steps · the model declined to answer · 1.5 s" in all_text(message)
