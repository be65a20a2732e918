"""The registry of answers in flight, on the real Redis and in memory: heartbeats, orphans,
exactly one claim however many processes race for it; and ``Recovery`` finishing an orphan
(trace ``interrupted``, the question in history, the run slot given back, the message
finished once)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from types import SimpleNamespace

import pytest

from adapters.recovery import HISTORY_NOTE, INTERRUPTED, Recovery
from core.redis_store import RedisRunRegistry, connect
from core.storage import Stores
from core.stores import InMemoryRunRegistry, RunRecord, RunRegistry
from core.trace import Trace, TraceStep


@pytest.fixture(params=["memory", "redis"])
async def registry(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str
) -> AsyncIterator[RunRegistry]:
    if request.param == "memory":
        yield InMemoryRunRegistry()
        return
    shared = connect(redis_url, prefix=redis_prefix)
    try:
        yield shared.runs
    finally:
        await shared.aclose()


def record(run_id: str, *, surface: str = "Slack", owner: str = "p1") -> RunRecord:
    return RunRecord(run_id, surface, f"conv-{run_id}", owner, {"channel": "C1", "ts": "1.0"})


async def test_a_silent_run_is_an_orphan_and_a_beating_one_is_not(registry: RunRegistry) -> None:
    await registry.beat([record("a"), record("b"), record("c", surface="Discord")], at=100.0)
    await registry.beat([record("b")], at=200.0)
    assert await registry.orphans("Slack", silent_since=150.0) == ["a"]
    assert await registry.orphans("Discord", silent_since=150.0) == ["c"]
    assert await registry.running("Slack", "b") and not await registry.running("Slack", "c")
    assert (await registry.count("Slack"), await registry.count("Discord")) == (2, 1)
    await registry.end("Slack", "a")
    assert await registry.orphans("Slack", silent_since=150.0) == []
    assert not await registry.running("Slack", "a")
    assert await registry.count("Slack") == 1


async def test_a_record_names_who_asked_and_where_for_any_process(registry: RunRegistry) -> None:
    asked = RunRecord("r", "Slack", "conv-r", "p1", {"channel": "C1"}, asker="U1", trace="{}")
    await registry.beat([asked], at=1.0)
    assert await registry.record("Slack", "r") == asked
    assert await registry.record("Discord", "r") is None  # another surface's runs are apart
    await registry.end("Slack", "r")
    assert await registry.record("Slack", "r") is None


async def test_exactly_one_claim_wins(registry: RunRegistry) -> None:
    await registry.beat([record("x")], at=1.0)
    claims = await asyncio.gather(*(registry.claim("Slack", "x") for _ in range(20)))
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0] == record("x")
    assert await registry.claim("Slack", "x") is None and not await registry.running("Slack", "x")


async def test_steps_added_since_the_record_come_with_its_claim(registry: RunRegistry) -> None:
    trace = Trace(question="q", id="s", conversation="conv-s")
    trace.steps.append(TraceStep(1, action="a", observation="1"))
    await registry.beat([replace(record("s"), trace=trace.to_json())], at=1.0)
    steps = [json.dumps(asdict(TraceStep(n, action="b", observation=str(n)))) for n in (2, 3)]
    assert await registry.update("Slack", "s", steps=steps[:1], at=2.0)
    head = replace(trace, steps=[], notices=["late"]).to_json()
    assert await registry.update(
        "Slack", "s", steps=steps[1:], record=replace(record("s"), trace=head), at=3.0
    )
    assert await registry.orphans("Slack", silent_since=2.5) == []
    claimed = await registry.claim("Slack", "s")
    assert claimed is not None
    left = Trace.from_json(claimed.trace)
    assert [s.index for s in left.steps] == [2, 3] and left.notices == ["late"]
    assert not await registry.update("Slack", "s", steps=steps, at=4.0), "claimed: it stays gone"
    assert not await registry.running("Slack", "s")


async def test_redis_keeps_nothing_once_runs_end(redis_url: str, redis_prefix: str) -> None:
    shared = connect(redis_url, prefix=redis_prefix)
    try:
        runs: RedisRunRegistry = shared.runs
        await runs.beat([record("a"), record("b")], at=1.0)
        for run_id in ("a", "b"):
            assert await runs.update("Slack", run_id, steps=['{"index": 1}'], at=2.0)
        await runs.end("Slack", "a")
        await runs.claim("Slack", "b")
        assert not await runs.update("Slack", "a", steps=['{"index": 2}'], at=3.0)
        keys = [k async for k in shared.client.scan_iter(match=redis_prefix + "inflight*")]
        assert keys == [], "an empty registry leaves no key behind"
    finally:
        await shared.aclose()


async def test_recovery_finishes_an_orphan_once_across_processes() -> None:
    stores = Stores.in_memory()
    trace = Trace(question="what is up?", conversation="conv-r", id="r")
    trace.steps.append(TraceStep(1, action="calculate", action_input="6*7", observation="42"))
    dead = RunRecord(
        "r", "Slack", "conv-r", "dead", {"channel": "C1", "ts": "1.0"}, "slack:U1", "ask-1",
        trace.to_json(),
    )  # fmt: skip
    await stores.runs.beat([dead], at=0.0)
    assert await stores.slots.take("slack:U1", "ask-1", limit=1, lease=60)
    finished: list[tuple[str, str, str]] = []

    async def finalise(rec: RunRecord, left: Trace, text: str) -> None:
        finished.append((rec.where["ts"], left.status, text))

    replicas = [Recovery(stores, surface="Slack", finalise=finalise) for _ in range(3)]
    counts = await asyncio.gather(*(r.sweep() for r in replicas))
    assert sorted(counts) == [0, 0, 1]
    assert finished == [("1.0", "interrupted", INTERRUPTED)]
    stored = await stores.traces.get("r")
    assert stored is not None and stored.status == "interrupted" and len(stored.steps) == 1
    said = [m["content"] for m in await stores.history.load("conv-r")]
    assert said == ["Question: what is up?", HISTORY_NOTE]
    assert await stores.slots.take("slack:U1", "ask-2", limit=1, lease=60), "slot given back"


async def test_a_run_of_this_process_is_never_its_own_orphan() -> None:
    """A stalled loop may leave this process's own heartbeat late: it is beaten, not taken."""
    stores = Stores.in_memory()
    now = [1_000.0]
    recovery = Recovery(stores, surface="Slack", orphan_after=10.0, clock=lambda: now[0])
    run = SimpleNamespace(trace=Trace(question="q", id="mine"))
    await recovery.track(run, conversation="c", where={}, asker_key="k", slot="s")  # type: ignore[arg-type]
    now[0] += 60.0
    assert await stores.runs.orphans("Slack", silent_since=now[0] - 10.0) == ["mine"]
    assert await recovery.sweep() == 0 and await recovery.running("mine")
    await recovery.keep("mine")
    assert await stores.runs.orphans("Slack", silent_since=now[0] - 10.0) == []


async def test_an_orphan_is_found_within_a_second_of_its_lease_not_at_the_next_heartbeat() -> None:
    stores = Stores.in_memory()
    finished: list[float] = []

    async def finalise(record: RunRecord, trace: Trace, text: str) -> None:
        finished.append(asyncio.get_running_loop().time())

    # Heartbeats 5 s apart (the default); the orphan's lease lapses 0.3 s from now.
    recovery = Recovery(
        stores, surface="Slack", finalise=finalise, beat_every=5.0, orphan_after=0.3
    )
    recovery.start()
    try:
        await asyncio.sleep(0.1)  # its first round (a beat and a look) is done
        left = asyncio.get_running_loop().time()
        await stores.runs.beat([record("dead", owner="gone")], at=time.time())
        async with asyncio.timeout(3):
            while not finished:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        assert finished[0] - left < 0.3 + 1.0 + 0.3  # the lease, one look, a loaded machine
    finally:
        await recovery.aclose()
