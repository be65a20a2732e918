"""A heartbeat on its way when its answer ends must not bring the answer back as an orphan
(seen in the realistic soak: answered Discord messages edited to "Interrupted" 25 s later,
by the very process that had answered them)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from adapters.recovery import Recovery
from core.agent import Agent
from core.scripted import ScriptedModel
from core.stores import InMemoryRunRegistry, RunRecord
from core.tools import ToolRegistry
from tests.stores import in_memory_stores


class LateRegistry(InMemoryRunRegistry):
    """Its beats reach the store only when ``arrive`` is set (a busy Redis, a late loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrive = asyncio.Event()
        self.late = False

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        if self.late:
            await self.arrive.wait()
        await super().beat(records, at=at)


async def test_an_answer_that_ended_during_its_beat_is_not_left_as_an_orphan() -> None:
    registry = LateRegistry()
    stores = in_memory_stores(runs=registry)
    agent = Agent(ScriptedModel(["Thought: ok\nAction: finish[ok]"]), ToolRegistry(), stores=stores)
    run = agent.start("q", conversation="slack:T1:C1:1.0")
    now = [1000.0]
    recovery = Recovery(stores, surface="slack", clock=lambda: now[0], orphan_after=25)
    await recovery.track(run, conversation="slack:T1:C1:1.0", where={}, asker_key="k", slot="s")
    registry.late = True
    beating = asyncio.create_task(recovery.beat())  # took its records; the write is late
    await asyncio.sleep(0)
    await recovery.untrack(run.trace.id)  # the answer ends meanwhile
    registry.arrive.set()
    await beating
    now[0] += 60
    assert await registry.orphans("slack", silent_since=now[0] - 25) == []
    assert await recovery.sweep() == 0, "nothing to finish as interrupted"
    await run.aclose()
