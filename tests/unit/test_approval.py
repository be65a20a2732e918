"""A person decides before a tool runs: the policy, the decisions and what the model, the
events and the trace make of each; the broker that carries a decision to the run."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.agent import Agent, AgentSettings
from core.approval import (
    ApprovalBroker,
    ApprovalRequest,
    AutoApprover,
    Decision,
    InMemoryAllowances,
    InMemoryDecisions,
)
from core.events import (
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Event,
    Finished,
    ObservationReady,
)
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolHints, ToolRegistry
from core.trace import Trace

WRITE = "Thought: I will save it.\nAction: save_note[buy milk]"
DONE = "Thought: done.\nAction: finish[saved]"


def tools(ran: list[str] | None = None) -> ToolRegistry:
    async def save_note(text: str) -> str:
        if ran is not None:
            ran.append(text)
        return f"saved {text!r}"

    async def calculate(arg: str) -> str:
        return "4"

    registry = ToolRegistry()
    registry.add(
        FunctionTool("save_note", save_note, "Saves a note.", "save_note[text]", hints=ToolHints())
    )
    registry.add(
        FunctionTool(
            "calculate", calculate, "Arithmetic.", "calculate[2+2]", hints=ToolHints(read_only=True)
        )
    )
    return registry


class Scripted:
    """An approver answering from a list, recording each request."""

    def __init__(self, *decisions: Decision | None) -> None:
        self.decisions = list(decisions)
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        decision = self.decisions.pop(0)
        if decision is None:
            await asyncio.Event().wait()  # nobody ever decides
        assert decision is not None
        return decision


async def collect(agent: Agent, question: str = "note: buy milk", **kw: str) -> list[Event]:
    """The run's events, each request for approval shown as it arrives (as a live message
    that is not held back shows it)."""
    events: list[Event] = []
    async for event in agent.run(question, conversation=kw.get("conversation", "c"), user="ada"):
        if isinstance(event, ApprovalRequested):
            event.shown()
        events.append(event)
    return events


def observations(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, ObservationReady)]


def trace_of(events: list[Event]) -> Trace:
    final = events[-1]
    assert isinstance(final, Finished), final
    return final.trace


async def test_read_only_tools_run_without_asking_and_others_wait_for_a_person() -> None:
    approver = Scripted(Decision("approve", "ada"))
    ran: list[str] = []
    model = ScriptedModel(["Thought: add\nAction: calculate[2+2]", WRITE, DONE])
    events = await collect(Agent(model, tools(ran), approve=approver))
    assert [r.name for r in approver.requests] == ["save_note"]
    request = approver.requests[0]
    assert (request.thought, request.input, request.step, request.asker) == (
        "I will save it.",
        "buy milk",
        2,
        "ada",
    )
    assert ran == ["buy milk"]
    asked = next(e for e in events if isinstance(e, ApprovalRequested))
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (asked.name, asked.input, asked.timeout) == ("save_note", "buy milk", 300.0)
    assert (decided.outcome, decided.by) == ("approved", "ada")
    approval = trace_of(events).steps[1].approval
    assert approval is not None and approval.describe() == "✅ approved by ada"


async def test_a_denial_is_an_observation_with_the_reason_and_the_tool_never_runs() -> None:
    ran: list[str] = []
    approver = Scripted(Decision("deny", "bob", reason="not that list"))
    events = await collect(Agent(ScriptedModel([WRITE, DONE]), tools(ran), approve=approver))
    assert ran == []
    assert observations(events) == ["The user denied this action. Their reason: not that list"]
    approval = trace_of(events).steps[0].approval
    assert approval is not None and approval.describe() == '🚫 denied by bob: "not that list"'


async def test_an_edit_runs_the_edited_input_and_the_observation_says_so() -> None:
    ran: list[str] = []
    approver = Scripted(Decision("edit", "ada", input="buy oat milk"))
    events = await collect(Agent(ScriptedModel([WRITE, DONE]), tools(ran), approve=approver))
    assert ran == ["buy oat milk"]
    (observation,) = observations(events)
    assert observation.startswith("Note: a person edited the input before it ran; it ran as ")
    assert "save_note[buy oat milk]" in observation and observation.endswith("'buy oat milk'")
    step = trace_of(events).steps[0]
    assert step.action_input == "buy oat milk"
    assert step.approval is not None and step.approval.input == "buy milk"
    assert step.approval.describe() == "✏️ edited by ada (the model wrote: buy milk)"


async def test_no_decision_in_time_is_a_denial_and_the_deadline_stood_still() -> None:
    settings = AgentSettings(approval_timeout=0.3, deadline=0.25)
    started = time.monotonic()
    events = await collect(
        Agent(ScriptedModel([WRITE, DONE]), tools(), approve=Scripted(None), settings=settings)
    )
    assert time.monotonic() - started >= 0.3  # longer than the run's whole deadline
    assert observations(events) == ["No decision within 0.3 s, so the action was not run."]
    assert trace_of(events).steps[0].approval.describe() == "⌛ no decision in time: denied"  # type: ignore[union-attr]


async def test_always_allows_the_tool_for_the_rest_of_the_conversation() -> None:
    allowances = InMemoryAllowances()
    approver = Scripted(Decision("always", "ada"))
    agent = Agent(
        ScriptedModel([WRITE, DONE, WRITE, DONE]), tools(), approve=approver, allowances=allowances
    )
    first = await collect(agent)
    second = await collect(agent)
    assert len(approver.requests) == 1 and approver.requests[0].remember
    assert trace_of(first).steps[0].approval.describe() == (  # type: ignore[union-attr]
        "✅ approved by ada, and allowed for the rest of the conversation"
    )
    assert trace_of(second).steps[0].approval.describe() == (  # type: ignore[union-attr]
        "✅ allowed for this conversation by ada"
    )
    assert not [e for e in second if isinstance(e, ApprovalRequested)]
    third = await collect(
        Agent(
            ScriptedModel([WRITE, DONE]),
            tools(),
            approve=Scripted(Decision("deny", "x")),
            allowances=allowances,
        ),
        conversation="another",
    )
    assert observations(third) == ["The user denied this action."]  # per conversation


async def test_the_operator_list_and_no_approver() -> None:
    listed = AgentSettings(approval_tools=frozenset({"calculate"}))
    approver = Scripted(Decision("approve", "ada"))
    model = ScriptedModel(["Thought: add\nAction: calculate[2+2]", DONE])
    await collect(Agent(model, tools(), approve=approver, settings=listed))
    assert [r.name for r in approver.requests] == ["calculate"]
    events = await collect(Agent(ScriptedModel([WRITE, DONE]), tools()))  # nobody to ask
    assert observations(events) == [
        "This tool needs a person's approval, and nobody here can give it."
    ]


async def test_stop_while_waiting_for_a_decision_ends_the_run() -> None:
    run = Agent(ScriptedModel([WRITE]), tools(), approve=Scripted(None)).start("q", user="ada")
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            run.cancel(by="ada")
    final = await run.wait()
    assert isinstance(final, Cancelled) and final.by == "ada"


async def test_parallel_calls_are_decided_one_at_a_time_and_run_together() -> None:
    approver = Scripted(Decision("approve", "ada"), Decision("deny", "ada"))
    calls = (("save_note", '{"input": "a"}'), ("save_note", '{"input": "b"}'))
    model = ScriptedModel([Turn("Two notes.", tool_calls=calls), Turn("Saved one.")])
    events = await collect(
        Agent(model, tools(), approve=approver, settings=AgentSettings(mode="tools"))
    )
    assert [(r.call, r.input, r.thought) for r in approver.requests] == [
        (0, "a", "Two notes."),
        (1, "b", "Two notes."),
    ]
    assert observations(events) == ["saved 'a'", "The user denied this action."]


async def test_the_broker_carries_a_decision_made_anywhere_to_the_waiting_run() -> None:
    channel = InMemoryDecisions()
    here, elsewhere = ApprovalBroker(channel), ApprovalBroker(channel)
    await here.start()
    await elsewhere.start()
    try:
        run = Agent(ScriptedModel([WRITE, DONE]), tools(), approve=here).start("q", user="ada")
        events: list[Event] = []
        async for event in run.events():
            events.append(event)
            if isinstance(event, ApprovalRequested):
                key = (run.trace.id, event.step, event.call)
                assert here.pending(key) is not None and elsewhere.pending(key) is None
                await elsewhere.decide(key, Decision("approve", "bob"))  # a click elsewhere
        assert trace_of(events).steps[0].approval.describe() == "✅ approved by bob"  # type: ignore[union-attr]
    finally:
        await here.aclose()
        await elsewhere.aclose()


def test_decisions_read_off_a_channel_are_checked() -> None:
    assert Decision.from_dict({"verdict": "approve", "by": "ada"}) == Decision("approve", "ada")
    for bad in (
        {"verdict": "launch", "by": "ada"},
        {"verdict": "approve"},
        {"verdict": "edit", "by": "ada"},
        {"verdict": "edit", "by": "ada", "input": 3},
    ):
        assert Decision.from_dict(bad) is None


async def test_auto_approver_for_scripts() -> None:
    events = await collect(
        Agent(
            ScriptedModel([WRITE, DONE]), tools(), approve=AutoApprover("deny", by="--approve no")
        )
    )
    assert observations(events) == ["The user denied this action."]


@pytest.mark.parametrize("outcome", ["approved", "denied"])
async def test_the_trace_keeps_the_decision_through_json(outcome: str) -> None:
    verdict = "approve" if outcome == "approved" else "deny"
    events = await collect(
        Agent(ScriptedModel([WRITE, DONE]), tools(), approve=Scripted(Decision(verdict, "ada")))
    )  # type: ignore[arg-type]
    loaded = Trace.from_json(trace_of(events).to_json())
    assert loaded.steps[0].approval is not None and loaded.steps[0].approval.outcome == outcome
    assert "**Approval:** " in loaded.to_markdown()


class WhenTold:
    """An approver that approves once the test says a person clicked."""

    def __init__(self) -> None:
        self.clicked = asyncio.Event()

    async def __call__(self, request: ApprovalRequest) -> Decision:
        await self.clicked.wait()
        return Decision("approve", "ada")


async def test_the_time_to_decide_counts_from_when_the_request_is_shown() -> None:
    """A message held back (a rate limit) for longer than the whole approval timeout: the
    person still gets the whole timeout once the buttons are on screen."""
    approver = WhenTold()
    settings = AgentSettings(approval_timeout=0.3)
    agent = Agent(
        ScriptedModel([WRITE, DONE]), tools(ran := []), approve=approver, settings=settings
    )
    events: list[Event] = []
    async for event in agent.run("note: buy milk", conversation="c", user="ada"):
        events.append(event)
        if isinstance(event, ApprovalRequested):
            await asyncio.sleep(0.5)  # held back longer than the timeout, then shown
            event.shown()
            approver.clicked.set()  # and decided at once
    assert ran == ["buy milk"], observations(events)
    assert trace_of(events).steps[0].approval.describe() == "✅ approved by ada"  # type: ignore[union-attr]


async def test_a_request_never_shown_still_times_out_after_the_show_window() -> None:
    settings = AgentSettings(approval_timeout=0.2, approval_show_within=0.2)
    agent = Agent(ScriptedModel([WRITE, DONE]), tools(), approve=Scripted(None), settings=settings)
    events = [e async for e in agent.run("note: buy milk", conversation="c", user="ada")]
    assert observations(events) == ["No decision within 0.2 s, so the action was not run."]
