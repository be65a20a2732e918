"""Where a schedule proposed by a question would post (``adapters.dispatch.schedule.place_of``)
and which runs are offered the ``schedule`` tool (``handlers.ask.proposing``)."""

from __future__ import annotations

import pytest

from adapters import words
from adapters.dispatch.checks import Admitted
from adapters.dispatch.handlers.ask import proposing
from adapters.dispatch.intents import Actor, PlaceKind, Where
from adapters.dispatch.schedule import place_of
from core.schedule_tool import ScheduleTool
from core.schedules import InMemorySchedules, Place, ScheduleBook, ScheduleSettings
from core.tools import FunctionTool, ToolRegistry


@pytest.mark.parametrize(
    ("platform", "kind", "thread", "expected"),
    [
        ("slack", "channel", None, Place("slack", "C1", "", "T1")),
        ("slack", "thread", "111.1", Place("slack", "C1", "111.1", "T1")),
        ("discord", "thread", "9", Place("discord", "C1", "9", "T1")),
        ("discord", "bot_thread", "9", Place("discord", "C1", "", "T1")),  # the channel's
        ("telegram", "topic", "7", Place("telegram", "C1", "7", "T1")),
        ("web", "session", None, None),  # no scheduled run is posted on the web
        ("terminal", "dm", None, None),
    ],
)
def test_where_a_proposed_schedule_posts(
    platform: str, kind: PlaceKind, thread: str | None, expected: Place | None
) -> None:
    assert place_of(Where(platform, kind, "C1", space="T1", thread=thread)) == expected


def registry() -> tuple[ToolRegistry, ScheduleTool]:
    async def calculate(arg: str) -> str:
        return arg

    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", calculate, "Adds.", "calculate[1+1]"))
    book = ScheduleBook(InMemorySchedules(), ScheduleSettings(default_timezone="UTC"))
    tool = ScheduleTool(book, say_added=words.schedule_added, say_refused=words.schedule_refused)
    tools.add(tool)
    return tools, tool


def ask(*, schedule: Place | None, scheduled: bool = False) -> Admitted[None]:
    return Admitted(
        who=None, actor=Actor("slack", "U1", "slack:T1:U1", "Ada"),
        at=Where("slack", "channel", "C1", space="T1"), place="slack:C1",
        question="q", ident="e1", schedule=schedule, scheduled=scheduled,
    )  # fmt: skip


async def test_a_run_gets_the_tool_bound_to_its_asker_and_place() -> None:
    tools, tool = registry()
    here = Place("slack", "C1", "", "T1")
    bound = proposing(tools, ask(schedule=here))
    given = bound.get("schedule")
    assert isinstance(given, ScheduleTool) and given is not tool
    assert bound.names == tools.names, "the other tools stay"
    assert await tool.run('{"when": "in 30 minutes", "question": "x"}') == (
        "Refused: schedules can only be added for a person in a chat."
    ), "the registry's own copy stays bound to nobody"


@pytest.mark.parametrize(
    "asked", [ask(schedule=None), ask(schedule=Place("slack", "C1"), scheduled=True)]
)
def test_no_tool_where_nothing_can_be_posted_nor_in_a_scheduled_run(
    asked: Admitted[None],
) -> None:
    tools, _ = registry()
    assert proposing(tools, asked).names == ["calculate"]


def test_a_registry_without_the_tool_is_given_as_it_is() -> None:
    tools = ToolRegistry()
    assert proposing(tools, ask(schedule=Place("slack", "C1"))) is tools
