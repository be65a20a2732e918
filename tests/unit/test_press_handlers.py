"""Stop and Decide, as the dispatcher handles them for every surface (``adapters.dispatch.
handlers``), against a run another process runs (its record in the shared registry) and
one whose process died: who may is asked first, then where; a run nobody runs any more
says so, and a dead process's is finished at once. No surface is involved: a surface only
translates its press into these intents."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters import words
from adapters.channels import ChannelChoices
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, Decide, Stop, Where
from adapters.dispatch.outcome import Done, Drop, Refusal
from adapters.policy import Policy
from core.agent import Agent
from core.approval import (
    ApprovalBroker,
    ApprovalRequest,
    Decision,
    InMemoryDecisions,
    InMemoryPending,
)
from core.budgets import TokenBudgets
from core.scripted import ScriptedModel
from core.stores import RunRecord, Stores
from core.tools import ToolRegistry
from core.trace import Trace

ASKER, ADMIN, OTHER = "1001", "9", "2002"
HERE = {"channel": "C1"}


@pytest.fixture
async def dispatcher() -> AsyncIterator[Dispatcher[str]]:
    stores = Stores.in_memory()
    broker = ApprovalBroker(InMemoryDecisions(), InMemoryPending())
    tools = ToolRegistry()
    answering: Answering[str] = Answering(
        Agent(ScriptedModel([]), tools, stores=stores),
        surface="test",
        policy=Policy("test", lease=25.0, approvers="asker"),
        stores=stores,
        budgets=TokenBudgets(stores.usage),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
        broker=broker,
    )
    await broker.start()
    try:
        yield Dispatcher(answering, claims=stores.claims, traces=stores.traces)
    finally:
        await answering.recovery.aclose()
        await broker.aclose()


async def _elsewhere(d: Dispatcher[str], run_id: str, *, silent_for: float) -> None:
    """A run another process answers in C1 for ``ASKER``, its heartbeat ``silent_for`` s old."""
    trace = Trace(question="q", conversation="test:C1", id=run_id)
    record = RunRecord(run_id, "test", "test:C1", "another", dict(HERE), trace=trace.to_json(),
                       asker=ASKER)  # fmt: skip
    await d.answering.recovery.registry.beat([record], at=time.time() - silent_for)


def _request(run_id: str, given: str, *, json_input: bool = False) -> ApprovalRequest:
    """The action ``run_id`` waits on (step 1, call 0), as the run stored it."""
    return ApprovalRequest(run_id, "test:C1", ASKER, 1, 0, "", "tool", given,
                           json_input=json_input, timeout=60, remember=False)  # fmt: skip


_presses = itertools.count()


def _pressed(user: str, at: dict[str, str], *, event: str = "") -> dict[str, Any]:
    """A press by ``user`` from ``at``: each its own event unless ``event`` names one."""
    actor = Actor("test", user, f"test:{user}", f"user{user}", admin=user == ADMIN)
    where = Where("test", "channel", at.get("channel", ""))
    event = event or f"press:{user}:{next(_presses)}"
    return {"event": event, "actor": actor, "where": where, "at": at}


async def test_stop_asks_who_then_where_then_stops_at_the_runs_process(
    dispatcher: Dispatcher[str],
) -> None:
    d = dispatcher
    await _elsewhere(d, "r1", silent_for=1.0)
    heard: list[tuple[str, str, str]] = []
    async with d.answering.stops.subscribe(lambda run, by, by_id: heard.append((run, by, by_id))):
        said = await d.stop(Stop(run_id="r1", **_pressed(OTHER, HERE)), named=lambda u: f"@{u}")
        assert said == Refusal("who", words.stop_refused(f"@{ASKER}"))
        for user in (ASKER, ADMIN):  # may stop it, but not from another channel
            said = await d.stop(Stop(run_id="r1", **_pressed(user, {"channel": "C2"})))
            assert said == Refusal("elsewhere", words.NOT_ITS_PLACE)
        assert heard == []
        assert await d.stop(Stop(run_id="r1", **_pressed(ADMIN, HERE))) == Done(words.STOPPING)
        await asyncio.sleep(0)  # the in-memory channel delivers on the loop's next turn
    assert heard == [("r1", f"user{ADMIN}", ADMIN)], "asked of the process that runs it"
    said = await d.stop(Stop(run_id="gone", **_pressed(ASKER, HERE)))
    assert said == Refusal("gone", words.NOT_RUNNING)


async def test_a_redelivered_stop_press_does_nothing_and_a_second_press_acts_harmlessly(
    dispatcher: Dispatcher[str],
) -> None:
    d = dispatcher
    await _elsewhere(d, "r1", silent_for=1.0)
    heard: list[str] = []
    async with d.answering.stops.subscribe(lambda run, by, by_id: heard.append(by_id)):
        press = Stop(run_id="r1", **_pressed(ASKER, HERE, event="press:one"))
        assert await d.stop(press) == Done(words.STOPPING)
        assert await d.stop(press) == Drop("duplicate"), "the same press, delivered again"
        other = Stop(run_id="r1", **_pressed(ADMIN, HERE))  # a press of its own
        assert await d.stop(other) == Done(words.STOPPING)
        await asyncio.sleep(0)
    assert heard == [ASKER, ADMIN], "a redelivery asks the run's process nothing"


async def test_a_redelivered_decision_press_decides_once(dispatcher: Dispatcher[str]) -> None:
    d = dispatcher
    broker = d.answering.broker
    assert broker is not None
    await _elsewhere(d, "r3", silent_for=1.0)
    await broker.shared.put(_request("r3", "x"))
    sent: list[Decision] = []
    async with broker.channel.subscribe(lambda key, decision: sent.append(decision)):
        press = Decide(run_id="r3", step=1, call=0, verdict="approve",
                       **_pressed(ASKER, HERE, event="press:approve"))  # fmt: skip
        assert await d.decide(press) == Done(words.decided("approve", with_words=False))
        assert await d.decide(press) == Drop("duplicate")
        await asyncio.sleep(0)
    assert [s.verdict for s in sent] == ["approve"]


async def test_a_decision_on_a_dead_processs_run_is_not_approved(
    dispatcher: Dispatcher[str],
) -> None:
    d = dispatcher
    await _elsewhere(d, "dead", silent_for=60.0)  # past its lease: its process died
    assert d.answering.broker is not None
    await d.answering.broker.shared.put(_request("dead", "x"))
    decide = Decide(run_id="dead", step=1, call=0, verdict="approve", **_pressed(ASKER, HERE))
    assert await d.decide(decide) == Refusal("gone", words.NOT_RUNNING)
    assert not await d.answering.recovery.registry.running("test", "dead"), "taken, finished"
    await d.answering.recovery.aclose()  # waits for what it is finishing
    stored = await d.answering.recovery.stores.traces.get("dead")
    assert stored is not None and stored.status == "interrupted"
    gone = Decide(run_id="dead", step=2, call=0, verdict="approve", **_pressed(ASKER, HERE))
    assert await d.decide(gone) == Refusal("gone", words.DECISION_GONE)


async def test_an_edit_is_checked_and_a_decision_reaches_the_runs_process(
    dispatcher: Dispatcher[str],
) -> None:
    d = dispatcher
    broker = d.answering.broker
    assert broker is not None
    await _elsewhere(d, "r2", silent_for=1.0)
    await broker.shared.put(_request("r2", "{}", json_input=True))
    sent: list[tuple[tuple[str, int, int], Decision]] = []
    async with broker.channel.subscribe(lambda key, decision: sent.append((key, decision))):
        bad = Decide(run_id="r2", step=1, call=0, verdict="edit", input="[1]", written=True,
                     **_pressed(ASKER, HERE))  # fmt: skip
        said = await d.decide(bad)
        assert isinstance(said, Refusal) and said.reason == "question"
        assert said.text.endswith("Nothing was decided: press Edit… again.")
        other = Decide(run_id="r2", step=1, call=0, verdict="approve", **_pressed(OTHER, HERE))
        assert await d.decide(other) == Refusal("who", words.decide_refused("asker"))
        good = Decide(run_id="r2", step=1, call=0, verdict="edit", input='{"a": 1}',
                      written=True, **_pressed(ASKER, HERE))  # fmt: skip
        assert await d.decide(good) == Done(words.decided("edit", with_words=True))
        await asyncio.sleep(0)
    ((key, decision),) = sent
    assert key == ("r2", 1, 0)
    assert (decision.verdict, decision.input, decision.by_id) == ("edit", '{"a": 1}', ASKER)
