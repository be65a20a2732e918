"""The ``schedule`` tool: approved by a person every time (an "always" is not kept), acting for
the run's asker in its place, refused inside a scheduled run and when bound to nobody."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters import words
from core.agent import Agent
from core.approval import Decision, InMemoryAllowances
from core.events import ApprovalRequested, Event, ObservationReady
from core.schedule_tool import IN_SCHEDULED_RUN, NOBODY, ScheduleTool
from core.scheduler import Occurrence, RecordingRunner, Scheduler
from core.schedules import (
    InMemorySchedules,
    Outcome,
    Place,
    ScheduleBook,
    ScheduleSettings,
)
from core.scripted import ScriptedModel
from core.stores import InMemoryEventClaims
from core.tools import ToolRegistry, needs_approval
from tests.unit.test_approval import Scripted

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC).timestamp()
PLACE = Place("slack", "C1", space="T1")
PROPOSE = (
    "Thought: I will schedule it.\nAction: schedule"
    '[{"when": "every monday 09:00 Europe/Paris", "question": "What changed in #releases?"}]'
)
DONE = "Thought: done.\nAction: finish[scheduled]"


def book() -> ScheduleBook:
    return ScheduleBook(InMemorySchedules(), ScheduleSettings(min_interval_seconds=60))


def tool_on(schedules: ScheduleBook) -> ScheduleTool:
    return ScheduleTool(
        schedules,
        say_added=words.schedule_added,
        say_refused=words.schedule_refused,
        clock=lambda: NOW,
    )


async def events_of(agent: Agent) -> list[Event]:
    found = []
    async for event in agent.run("every monday, what changed?", conversation="slack:T1:C1"):
        if isinstance(event, ApprovalRequested):
            event.shown()
        found.append(event)
    return found


async def test_each_proposal_is_approved_on_its_own_and_adds_for_the_asker() -> None:
    schedules = book()
    registry = ToolRegistry()
    bound = tool_on(schedules).for_asker(
        owner="slack:T1:UADA", owner_name="@ada", place=PLACE, admin=True
    )
    registry.add(bound)
    assert needs_approval(bound)
    approver = Scripted(Decision("always", "ada"), Decision("approve", "ada"))
    agent = Agent(
        ScriptedModel([PROPOSE, DONE, PROPOSE, DONE]),
        registry,
        approve=approver,
        allowances=InMemoryAllowances(),
    )
    first, second = await events_of(agent), await events_of(agent)
    assert len(approver.requests) == 2, "an always is not kept for this tool"
    assert not any(r.remember for r in approver.requests), "and is not offered"
    said = [e.text for e in first + second if isinstance(e, ObservationReady)]
    assert all(s.startswith("⏰ Scheduled ") for s in said), said
    kept = await schedules.listing(PLACE)
    assert [(s.owner, s.when.text, s.question) for s in kept] == [
        ("slack:T1:UADA", "every monday 09:00 Europe/Paris", "What changed in #releases?")
    ] * 2


async def test_the_books_rules_apply_and_refusals_are_said() -> None:
    tool = tool_on(book())
    arg = '{"when": "every monday 09:00 Europe/Paris", "question": "q"}'
    assert await tool.run(arg) == NOBODY
    member = tool.for_asker(owner="slack:T1:UBOB", owner_name="@bob", place=PLACE, admin=False)
    assert await member.run(arg) == "Refused: Only an admin can add a schedule here."
    admin = tool.for_asker(owner="slack:T1:UADA", owner_name="@ada", place=PLACE, admin=True)
    said = await admin.run('{"when": "every day 09:00", "question": "q"}')
    assert said.startswith("Refused: Which time zone?")
    assert (await admin.run("not json")).startswith('Refused: give {"when"')


async def test_a_scheduled_run_cannot_create_a_schedule() -> None:
    schedules = book()
    admin = tool_on(schedules).for_asker(
        owner="slack:T1:UADA", owner_name="@ada", place=PLACE, admin=True
    )
    await admin.run('{"when": "* * * * * UTC", "question": "and another?"}')

    said: list[str] = []

    class ProposingRunner(RecordingRunner):
        async def run(self, occurrence: Occurrence) -> Outcome:
            said.append(await admin.run('{"when": "in 5 minutes", "question": "more?"}'))
            return "ok"

    runner = ProposingRunner()
    now = [NOW + 61]
    scheduler = Scheduler(
        book=schedules,
        claims=InMemoryEventClaims(),
        runner=runner,
        notice=runner,
        clock=lambda: now[0],
    )
    await scheduler.tick()
    await scheduler.settled()
    assert said == [IN_SCHEDULED_RUN]
    assert len(await schedules.listing()) == 1
