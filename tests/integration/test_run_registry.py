"""The registry of answers in flight on the real Redis (heartbeats, orphans and one claim per
run on every backend: ``tests/stores``), and ``Recovery`` finishing an orphan
(trace ``interrupted``, the question in history, the run slot given back, the message
finished once)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from adapters.recovery import HISTORY_NOTE, INTERRUPTED, Recovery
from core.stores import RunRecord, Stores
from core.stores.redis import RedisRunRegistry, connect
from core.trace import Trace, TraceStep


def record(run_id: str, *, surface: str = "Slack", owner: str = "p1") -> RunRecord:
    return RunRecord(run_id, surface, f"conv-{run_id}", owner, {"channel": "C1", "ts": "1.0"})


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
