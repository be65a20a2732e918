"""A press on a run whose process died is told the truth at once (``Recovery.
left_by_the_dead``): the run is taken from the registry and finished (interrupted, its
message's last edit) as the next sweep would; a run still beating, or one of this
process's own, is left alone."""

from __future__ import annotations

import asyncio

from adapters.recovery import INTERRUPTED, Recovery
from core.stores import RunRecord
from core.trace import Trace
from tests.stores import in_memory_stores

NOW = 1_000_000.0


def record(run_id: str) -> RunRecord:
    trace = Trace(question="what is up?", conversation="web:s", id=run_id)
    return RunRecord(run_id, "web", "web:s", "dead", {"session": "s"}, trace=trace.to_json())


async def test_a_dead_processs_run_is_taken_and_finished_a_live_ones_is_not() -> None:
    stores = in_memory_stores()
    finished: list[tuple[str, str, str]] = []
    done = asyncio.Event()

    async def finalise(left: RunRecord, trace: Trace, text: str) -> None:
        finished.append((left.run_id, trace.status, text))
        done.set()

    recovery = Recovery(stores, surface="web", finalise=finalise, orphan_after=25.0,
                        clock=lambda: NOW)  # fmt: skip
    await stores.runs.beat([record("dead")], at=NOW - 26.0)
    await stores.runs.beat([record("alive")], at=NOW - 5.0)

    assert not await recovery.left_by_the_dead("alive"), "its heartbeat is within the lease"
    assert await stores.runs.running("web", "alive")
    assert await recovery.left_by_the_dead("dead")
    assert not await stores.runs.running("web", "dead"), "taken: no other process finishes it"
    await asyncio.wait_for(done.wait(), 2.0)
    assert finished == [("dead", "interrupted", INTERRUPTED)]
    stored = await stores.traces.get("dead")
    assert stored is not None and stored.status == "interrupted"
    assert not await recovery.left_by_the_dead("dead"), "gone: nothing more to take"
    await recovery.aclose()
    assert recovery.recovered == 1
