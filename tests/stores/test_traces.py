"""Conformance: traces (saved, listed, voted on), the same on every backend."""

from __future__ import annotations

import asyncio
import time

from core.trace import Trace, TraceStep
from tests.stores.conformance import Backend

NOW = time.time()


def trace(conversation: str, question: str, started_at: float) -> Trace:
    """A trace started ``started_at`` seconds after the suite began (an index keeps only
    the traces of the last ``trace_ttl``)."""
    return Trace(question=question, conversation=conversation, started_at=NOW + started_at)


class TestTraces:
    async def test_saved_traces_list_newest_first_per_conversation_and_in_all(
        self, backend: Backend
    ) -> None:
        saved = [trace("c", f"q{i}", float(i)) for i in range(3)] + [trace("d", "x", 1.5)]
        for t in saved:
            await backend.here.traces.save(t)
        traces = backend.there.traces
        assert [t.question for t in await traces.list("c")] == ["q2", "q1", "q0"]
        assert [t.question for t in await traces.list("c", limit=1)] == ["q2"]
        assert [t.question for t in await traces.recent(limit=3)] == ["q2", "x", "q1"]
        assert await traces.recent(limit=0) == []
        last = await traces.last("c")
        assert last is not None and last.question == "q2"
        assert await traces.last("nobody") is None
        got = await traces.get(saved[3].id)
        assert got is not None and got.to_json() == saved[3].to_json()
        assert await traces.get("no-such-run") is None

    async def test_a_saved_trace_is_a_snapshot(self, backend: Backend) -> None:
        live = trace("c", "q", 0.0)
        await backend.here.traces.save(live)
        live.steps.append(TraceStep(index=1))
        stored = await backend.there.traces.get(live.id)
        assert stored is not None and stored.steps == []

    async def test_a_vote_replaces_the_voters_earlier_one(self, backend: Backend) -> None:
        answered = trace("c", "q", 0.0)
        await backend.here.traces.save(answered)
        assert await backend.here.traces.vote(answered.id, "up", "ada")
        assert await backend.there.traces.vote(answered.id, "up", "bob")
        assert await backend.there.traces.vote(answered.id, "down", "ada")
        stored = await backend.here.traces.get(answered.id)
        assert stored is not None
        assert sorted((v.by, v.value) for v in stored.votes) == [("ada", "down"), ("bob", "up")]
        assert stored.feedback_line() == "👍 1 · 👎 1"

    async def test_no_vote_is_lost_when_many_vote_at_once_on_any_process(
        self, backend: Backend
    ) -> None:
        answered = trace("c", "q", 0.0)
        answered.steps.append(TraceStep(index=1, action="search", observation="r" * 2000))
        await backend.here.traces.save(answered)
        stores = (backend.here.traces, backend.there.traces)
        voted = await asyncio.gather(
            *(stores[i % 2].vote(answered.id, "up", f"u{i}") for i in range(24))
        )
        assert all(voted)
        stored = await backend.there.traces.get(answered.id)
        assert stored is not None
        assert sorted(v.by for v in stored.votes) == sorted(f"u{i}" for i in range(24))
        assert stored.steps == answered.steps, "the rest of the trace is as it was"

    async def test_a_vote_on_a_trace_no_longer_stored_says_so(self, backend: Backend) -> None:
        assert not await backend.here.traces.vote("gone", "up", "ada")
        assert await backend.here.traces.get("gone") is None
