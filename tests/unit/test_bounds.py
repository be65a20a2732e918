"""Bounds on what a user controls: question length and runs in flight per user."""

from __future__ import annotations

from core.agent import Agent, AgentSettings
from core.events import Failed
from core.scripted import ScriptedModel
from core.stores import InMemoryRunSlots
from core.tools import ToolRegistry


async def test_a_question_over_the_limit_is_refused_without_a_model_call() -> None:
    model = ScriptedModel([])
    agent = Agent(model, ToolRegistry(), settings=AgentSettings(max_question_chars=100))
    assert agent.question_problem("x" * 100) is None
    run = agent.start("x" * 5_000_000)
    final = await run.wait()
    assert isinstance(final, Failed) and final.kind == "input"
    assert final.reason == "The question is 5,000,000 characters long; the limit is 100."
    assert model.calls == []
    assert len(final.trace.question) == 101  # the trace keeps the start, not megabytes


async def test_run_slots_hold_the_limit_per_key_and_expire() -> None:
    now = [0.0]
    slots = InMemoryRunSlots(clock=lambda: now[0])
    assert await slots.take("u", "a", limit=2, lease=10)
    assert await slots.take("u", "b", limit=2, lease=10)
    assert not await slots.take("u", "c", limit=2, lease=10)
    assert await slots.take("v", "c", limit=2, lease=10), "limits are per key"
    await slots.give_back("u", "a")
    assert await slots.take("u", "c", limit=2, lease=10)
    now[0] = 11.0  # both leases ran out (a run that never gave its slot back)
    assert await slots.take("u", "d", limit=1, lease=10)
