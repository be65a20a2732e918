"""The records of the answers in flight cost what changed: a finished step writes that step,
for that run alone; the head is written again only when it changed; with nothing new a run
renews its heartbeat on its own timer. And a write on its way when its answer ends must not
bring the answer back as an orphan (seen in the realistic soak: answered Discord messages
edited to "Interrupted" 25 s later, by the very process that had answered them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any

from adapters.recovery import HISTORY_NOTE, Recovery
from core.agent import Agent
from core.events import Event, ObservationReady
from core.scripted import ScriptedModel
from core.stores import TRACE_SNAPSHOT_CHARS, InMemoryRunRegistry, RunRecord
from core.tools import ToolRegistry
from core.trace import Trace, TraceStep
from tests.stores import in_memory_stores


class LateRegistry(InMemoryRunRegistry):
    """Its writes reach the store only when ``arrive`` is set (a busy Redis, a late loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrive = asyncio.Event()
        self.late = False

    async def update(self, surface: str, run_id: str, **kwargs: Any) -> bool:
        if self.late:
            await self.arrive.wait()
        return await super().update(surface, run_id, **kwargs)


class CountingRegistry(InMemoryRunRegistry):
    """Every write, as the store would receive it: (what, run, characters)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str, int]] = []
        self.written = asyncio.Event()

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        self.writes += [("whole", r.run_id, len(r.to_json())) for r in records]
        await super().beat(records, at=at)

    async def update(
        self,
        surface: str,
        run_id: str,
        *,
        steps: Sequence[str] = (),
        record: RunRecord | None = None,
        at: float,
    ) -> bool:
        size = sum(map(len, steps)) + (len(record.to_json()) if record else 0)
        self.writes.append(("update", run_id, size))
        self.written.set()
        return await super().update(surface, run_id, steps=steps, record=record, at=at)


def running_trace(run_id: str, steps: int, *, size: int = 4000) -> Any:
    trace = Trace(question="q", id=run_id, conversation=f"c-{run_id}")
    for n in range(steps):
        trace.steps.append(TraceStep(n + 1, action="search", observation="x" * size))
    return SimpleNamespace(trace=trace)


async def one_observation(step: int) -> AsyncIterator[Event]:
    yield ObservationReady(step, "search", "x")


async def test_a_finished_step_writes_that_step_for_that_run_alone() -> None:
    registry = CountingRegistry()
    recovery = Recovery(in_memory_stores(runs=registry), surface="slack", beat_every=3600)
    runs = [running_trace(f"r{n}", 10) for n in range(40)]
    for run in runs:
        await recovery.track(
            run, conversation=run.trace.conversation, where={}, asker_key="k", slot="s"
        )
    registry.writes.clear()
    recovery.start()
    try:
        busy = runs[7].trace
        busy.steps.append(TraceStep(11, action="search", observation="new " * 10))
        async for _ in recovery.watched(busy.id, one_observation(11)):
            pass
        async with asyncio.timeout(5):
            await registry.written.wait()
        await asyncio.sleep(0.05)  # room for any other write to show up
    finally:
        await recovery.aclose()
    step = len(json.dumps(json.loads(_step_json(busy, 10))))
    assert registry.writes == [("update", "r7", step)], "one run, one step, no head, no other"


def _step_json(trace: Trace, index: int) -> str:
    from core.stores import step_json

    return step_json(trace, index)


async def test_the_head_is_written_again_only_when_it_changed() -> None:
    registry = CountingRegistry()
    recovery = Recovery(in_memory_stores(runs=registry), surface="slack")
    run = running_trace("r", 3)
    await recovery.track(run, conversation="c", where={}, asker_key="k", slot="s")
    registry.writes.clear()
    await recovery.keep("r")
    assert registry.writes == [("update", "r", 0)], "nothing new: the heartbeat alone"
    run.trace.notices.append("retrying after a 429")
    await recovery.keep("r")
    assert registry.writes[-1][2] > 0
    claimed = await registry.claim("slack", "r")
    assert claimed is not None
    left = Trace.from_json(claimed.trace)
    assert left.notices == ["retrying after a 429"] and len(left.steps) == 3


async def test_steps_are_added_in_order_and_the_one_being_written_waits() -> None:
    registry = InMemoryRunRegistry()
    recovery = Recovery(in_memory_stores(runs=registry), surface="slack")
    run = running_trace("r", 1)
    await recovery.track(run, conversation="c", where={}, asker_key="k", slot="s")
    run.trace.steps.append(TraceStep(2, action="calculate", observation="4"))
    run.trace.steps.append(TraceStep(3, thought="still thinking"))  # no observation yet
    await recovery.keep("r")
    claimed = await registry.claim("slack", "r")
    assert claimed is not None
    assert [s.index for s in Trace.from_json(claimed.trace).steps] == [1, 2]


async def test_a_record_keeps_its_first_steps_up_to_its_bound() -> None:
    registry = InMemoryRunRegistry()
    recovery = Recovery(in_memory_stores(runs=registry), surface="slack")
    run = running_trace("r", 0)
    await recovery.track(run, conversation="c", where={}, asker_key="k", slot="s")
    size = TRACE_SNAPSHOT_CHARS // 5
    for n in range(8):
        run.trace.steps.append(TraceStep(n + 1, action="search", observation="y" * size))
        await recovery.keep("r")
    claimed = await registry.claim("slack", "r")
    assert claimed is not None and len(claimed.trace) <= TRACE_SNAPSHOT_CHARS
    assert [s.index for s in Trace.from_json(claimed.trace).steps] == [1, 2, 3, 4]


async def test_an_answer_that_ended_during_its_write_is_not_left_as_an_orphan() -> None:
    registry = LateRegistry()
    stores = in_memory_stores(runs=registry)
    agent = Agent(ScriptedModel(["Thought: ok\nAction: finish[ok]"]), ToolRegistry(), stores=stores)
    run = agent.start("q", conversation="slack:T1:C1:1.0")
    now = [1000.0]
    recovery = Recovery(stores, surface="slack", clock=lambda: now[0], orphan_after=25)
    await recovery.track(run, conversation="slack:T1:C1:1.0", where={}, asker_key="k", slot="s")
    registry.late = True
    writing = asyncio.create_task(recovery.keep(run.trace.id))  # on its way, late
    await asyncio.sleep(0)
    await recovery.untrack(run.trace.id)  # the answer ends meanwhile
    registry.arrive.set()
    await writing
    now[0] += 60
    assert await registry.orphans("slack", silent_since=now[0] - 25) == []
    assert await recovery.sweep() == 0, "nothing to finish as interrupted"
    await run.aclose()


class SlowEnd(InMemoryRunRegistry):
    """``end`` reaches the store only when ``arrive`` is set (a busy Redis)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrive = asyncio.Event()
        self.ending = asyncio.Event()

    async def end(self, surface: str, run_id: str) -> None:
        self.ending.set()
        await self.arrive.wait()
        await super().end(surface, run_id)


async def test_an_answer_ending_late_is_not_taken_for_an_orphan_by_its_own_process() -> None:
    registry = SlowEnd()
    stores = in_memory_stores(runs=registry)
    agent = Agent(ScriptedModel(["Thought: ok\nAction: finish[ok]"]), ToolRegistry(), stores=stores)
    run = agent.start("q", conversation="slack:T1:C1:1.0")
    now = [1000.0]
    recovery = Recovery(stores, surface="slack", clock=lambda: now[0], orphan_after=25)
    await recovery.track(run, conversation="slack:T1:C1:1.0", where={}, asker_key="k", slot="s")
    now[0] += 60  # its loop stalled past the lease: the record looks silent
    ending = asyncio.create_task(recovery.untrack(run.trace.id))  # the answer ends meanwhile
    await registry.ending.wait()
    assert await recovery.sweep() == 0, "its own answer, ending: not finished as interrupted"
    registry.arrive.set()
    await ending
    history = await stores.history.load("slack:T1:C1:1.0")
    assert HISTORY_NOTE not in [m["content"] for m in history], "no 'the bot restarted' note"
    await run.aclose()
