"""In-memory stores, the resilient wrappers, the history compactor and trace export."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.trace_commands import export_trace, format_trace_list
from core.errors import ModelUnavailable, StoreUnavailable
from core.history import InMemoryHistoryStore, Message
from core.memory import (
    HistoryCompactor,
    answer_message,
    estimate_tokens,
    history_tokens,
)
from core.prompt import summary_text
from core.scripted import ScriptedModel, Turn
from core.stores import (
    InMemoryChannelSettings,
    InMemoryLocks,
    InMemoryRunSlots,
    InMemoryTraceStore,
    OnWait,
    renewing,
)
from core.stores.resilient import (
    ResilientChannelSettings,
    ResilientEventClaims,
    ResilientHistory,
    ResilientLocks,
    ResilientTraceStore,
    StoreHealth,
)
from core.trace import Trace, TraceStep


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def turn(i: int, size: int = 1) -> list[Message]:
    return [
        {"role": "user", "content": f"q{i} " * size},
        {"role": "assistant", "content": f"a{i} " * size},
    ]


# ---- in-memory traces ---------------------------------------------------------------------


def trace(conversation: str, question: str, started_at: float = 0.0) -> Trace:
    return Trace(question=question, conversation=conversation, started_at=started_at)


async def test_trace_store_is_bounded_by_count_and_age() -> None:
    clock = FakeClock()
    store = InMemoryTraceStore(max_traces=2, ttl_seconds=60, clock=clock)
    first, second, third = trace("c", "1"), trace("c", "2"), trace("c", "3")
    for t in (first, second, third):
        await store.save(t)
    assert await store.get(first.id) is None
    assert await store.get(third.id) is not None
    clock.now += 61
    assert await store.get(third.id) is None
    assert await store.list("c") == []


# ---- in-memory locks ----------------------------------------------------------------------


async def run_pair(locks: InMemoryLocks | ResilientLocks, hold_for: float = 0.05) -> list[str]:
    order: list[str] = []
    waited: list[str] = []
    first_inside = asyncio.Event()

    async def run(name: str) -> None:
        async with locks.hold("c", on_wait=lambda: waited.append(name)):
            order.append(f"{name} in")
            first_inside.set()
            await asyncio.sleep(hold_for)
            order.append(f"{name} out")

    first = asyncio.create_task(run("first"))
    await first_inside.wait()
    await asyncio.gather(first, run("second"))
    return order + [f"waited {w}" for w in waited]


async def test_local_locks_serialise_and_report_waiting_once() -> None:
    locks = InMemoryLocks()
    assert await run_pair(locks) == [
        "first in",
        "first out",
        "second in",
        "second out",
        "waited second",
    ]
    assert locks._locks == {}  # nothing left behind per conversation


async def test_local_locks_accept_an_async_on_wait() -> None:
    locks = InMemoryLocks()
    seen: list[str] = []

    async def on_wait() -> None:
        seen.append("waiting")

    async with locks.hold("c"):
        waiter = asyncio.create_task(_enter(locks, "c", on_wait))
        await asyncio.sleep(0.01)
    await waiter
    assert seen == ["waiting"]


async def _enter(locks: InMemoryLocks, conversation: str, on_wait: OnWait | None = None) -> None:
    async with locks.hold(conversation, on_wait=on_wait):
        pass


async def test_a_hung_holder_blocks_only_for_the_lease() -> None:
    locks = InMemoryLocks(lease_seconds=0.05)
    hung = asyncio.Event()

    async def hang() -> None:
        async with locks.hold("c"):
            hung.set()
            await asyncio.sleep(10)

    holder = asyncio.create_task(hang())
    await hung.wait()
    async with asyncio.timeout(1):
        async with locks.hold("c"):
            pass
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert locks._locks == {}


async def test_a_live_holder_keeps_the_lock_past_its_lease_up_to_its_longest_hold() -> None:
    """A run waiting for a person outlasts the lease (its deadline stands still), so it
    renews the lease; one that hangs past the longest healthy run loses the lock."""
    locks = InMemoryLocks(lease_seconds=0.1, hold_at_most=0.6)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with locks.hold("c"):
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await held.wait()
    started = time.monotonic()
    waiter = asyncio.create_task(_enter(locks, "c"))
    await asyncio.sleep(0.3)  # three leases: the holder renewed, the waiter still waits
    assert not waiter.done()
    await waiter  # past the longest hold the lease lapses: the waiter goes ahead
    assert 0.5 - 0.05 <= time.monotonic() - started < 1.5
    release.set()
    await holder


async def test_renewing_a_run_slot_keeps_it_while_the_run_lives() -> None:
    slots = InMemoryRunSlots()
    assert await slots.take("user", "run-1", limit=1, lease=0.1)

    async def renew() -> None:
        await slots.take("user", "run-1", limit=1, lease=0.1)

    async with renewing(renew, every=0.03, until=10, what="run slot run-1"):
        await asyncio.sleep(0.3)
        assert not await slots.take("user", "run-2", limit=1, lease=0.1)
    await asyncio.sleep(0.15)  # no longer renewed: the lease runs out
    assert await slots.take("user", "run-2", limit=1, lease=0.1)


# ---- resilient wrappers -------------------------------------------------------------------


class DownHistory(InMemoryHistoryStore):
    """An in-memory store that can be switched off, like a Redis that died."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    async def load(self, conversation: str) -> list[Message]:
        self._check()
        return await super().load(conversation)

    async def append(self, conversation: str, *messages: Message) -> None:
        self._check()
        await super().append(conversation, *messages)

    def _check(self) -> None:
        self.calls += 1
        if self.down:
            raise StoreUnavailable("Redis at 127.0.0.1:6379/0 failed: connection refused")


async def test_resilient_history_forgets_notices_once_and_retries_later() -> None:
    clock = FakeClock()
    failures: list[str | None] = []
    health = StoreHealth(retry_after=5, clock=clock, on_unavailable=lambda c, _: failures.append(c))
    inner = DownHistory()
    history = ResilientHistory(inner, health=health)
    await history.append("c", *turn(1))

    inner.down = True
    assert await history.load("c") == []
    await history.append("c", *turn(2))  # dropped, without asking the dead store again
    assert inner.calls == 2
    assert history.degraded and failures == ["c"]
    assert health.take_notice("c") and not health.take_notice("c")
    assert not health.take_notice("other")

    inner.down = False
    clock.now += 5
    assert await history.load("c") == turn(1)
    assert not history.degraded


async def test_resilient_history_replaces_through_clear_and_append() -> None:
    history = ResilientHistory(InMemoryHistoryStore())
    await history.append("c", *turn(1), *turn(2))
    await history.replace("c", turn(3))
    assert await history.load("c") == turn(3)
    await history.clear("c")
    assert await history.load("c") == []


class DownLocks:
    @asynccontextmanager
    async def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AsyncIterator[None]:
        raise StoreUnavailable("down")
        yield  # pragma: no cover


async def test_resilient_locks_fall_back_to_the_process_lock() -> None:
    health = StoreHealth()
    locks = ResilientLocks(DownLocks(), health=health)
    order = await run_pair(locks)
    assert order[:4] == ["first in", "first out", "second in", "second out"]
    assert order[4:] == ["waited second"]
    assert health.degraded and health.take_notice("c")


class DownClaims:
    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        raise StoreUnavailable("down")

    async def release(self, event_id: str) -> None:
        raise StoreUnavailable("down")


class SharedClaims:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        if event_id in self.seen:
            return False
        self.seen.add(event_id)
        return True

    async def release(self, event_id: str) -> None:
        self.seen.discard(event_id)


async def test_resilient_claims_fall_back_and_remember_shared_claims() -> None:
    down = ResilientEventClaims(DownClaims())
    assert [await down.claim("e") for _ in range(3)] == [True, False, False]
    await down.release("e")  # the shared store cannot hear it; this process can
    assert await down.claim("e") is True

    shared = SharedClaims()
    here, there = ResilientEventClaims(shared), ResilientEventClaims(shared)
    assert await here.claim("e") is True
    assert await there.claim("e") is False  # another process claimed it first
    assert await here.claim("e") is False  # answered locally, the shared store not asked


class DownTraces(InMemoryTraceStore):
    async def save(self, trace: Trace) -> None:
        raise StoreUnavailable("down")


async def test_resilient_traces_keep_unsaved_traces_in_this_process() -> None:
    traces = ResilientTraceStore(DownTraces())
    kept = trace("c", "q", started_at=5)
    await traces.save(kept)
    assert await traces.get(kept.id) is not None
    last = await traces.last("c")
    assert last is not None and last.id == kept.id


async def test_resilient_traces_list_and_vote_on_this_process_s_traces() -> None:
    """With the shared store down, the traces this process kept are still listed, and a
    vote on one of them is kept on it."""
    traces = ResilientTraceStore(DownTraces())
    kept = trace("c", "here", started_at=9)
    await traces.save(kept)
    assert [t.question for t in await traces.recent()] == ["here"]
    assert await traces.vote(kept.id, "down", "ada")
    voted = await traces.get(kept.id)
    assert voted is not None and [(v.value, v.by) for v in voted.votes] == [("down", "ada")]
    assert not await traces.vote("unknown", "up", "ada")


# ---- token budget -------------------------------------------------------------------------


def test_token_estimate_counts_cjk_per_character() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("你好世界") == 4
    assert estimate_tokens("hi 你好") == 2 + 1


async def test_history_within_budget_is_untouched() -> None:
    model = ScriptedModel([])
    compactor = HistoryCompactor(model, budget_tokens=1000)
    history = turn(1) + turn(2)
    assert await compactor.fit("c", history) == history
    model.assert_complete()


async def test_oldest_turns_become_a_stored_summary() -> None:
    model = ScriptedModel(["The user asked q0 to q3; answers a0 to a3."])
    store = InMemoryHistoryStore(max_turns=50)
    history = [m for i in range(6) for m in turn(i, size=20)]
    await store.append("c", *history)
    compactor = HistoryCompactor(model, budget_tokens=120)

    fitted = await compactor.fit("c", await store.load("c"), store=store)
    model.assert_complete()
    assert fitted[0]["role"] == "user"  # data, never instructions: see test_prompt_injection
    assert summary_text(fitted[0]) is not None
    assert summary_text(fitted[0]).startswith("The user asked q0")  # type: ignore[union-attr]
    assert fitted[1:] == history[-len(fitted) + 1 :]
    assert fitted[1]["role"] == "user"
    assert history_tokens(fitted) <= 120
    assert await store.load("c") == fitted  # stored, so the next turn does not summarise again
    assert await compactor.fit("c", await store.load("c"), store=store) == fitted
    transcript = model.calls[0].messages[-1]["content"]
    assert "User: q0" in transcript and "Assistant: a0" in transcript


async def test_summary_failure_falls_back_to_recent_turns_without_storing() -> None:
    model = ScriptedModel([Turn(error=ModelUnavailable("down"))])
    store = InMemoryHistoryStore(max_turns=50)
    history = [m for i in range(6) for m in turn(i, size=20)]
    await store.append("c", *history)
    fitted = await HistoryCompactor(model, budget_tokens=120).fit("c", history, store=store)
    assert fitted == history[-len(fitted) :] and history_tokens(fitted) <= 120
    assert await store.load("c") == history


async def test_an_overlong_summary_is_cut_to_its_share_of_the_budget() -> None:
    model = ScriptedModel(["word " * 500])
    history = [m for i in range(6) for m in turn(i, size=20)]
    fitted = await HistoryCompactor(model, budget_tokens=120).fit("c", history)
    assert history_tokens(fitted) <= 120
    assert summary_text(fitted[0]).endswith("…")  # type: ignore[union-attr]


def test_answer_message_with_compact_steps() -> None:
    finished = finished_trace()
    finished.steps[0].observation = "x" * 500
    assert answer_message(finished) == {"role": "assistant", "content": "2"}
    with_steps = answer_message(finished, with_steps=True)
    assert with_steps["steps"].startswith("calculator[1+1] -> xxx")
    assert len(with_steps["steps"]) < 230


# ---- trace commands -----------------------------------------------------------------------


def finished_trace() -> Trace:
    step = TraceStep(
        index=1, thought="add", action="calculator", action_input="1+1", observation="2"
    )
    return Trace(
        question="What is 1+1?\nPlease answer.",
        conversation="c",
        started_at=1_700_000_000,
        ended_at=1_700_000_002,
        steps=[step],
        answer="2",
        status="answered",
    )


def test_format_trace_list() -> None:
    assert format_trace_list([]) == "No stored traces."
    line = format_trace_list([finished_trace()])
    assert "2023-11-14T22:13:20+00:00" in line
    assert "answered" in line and "What is 1+1? Please answer." in line
    assert "\n" not in line


def test_trace_list_columns_line_up_and_slack_ids_are_whole() -> None:
    slack, short = finished_trace(), finished_trace()
    slack.conversation = "slack:T0TEAM:C1GENERAL:1700000000.000002"
    short.conversation, short.status, short.question = "terminal", "interrupted", "Why?"
    lines = format_trace_list([slack, short], conversations=True).splitlines()
    assert slack.conversation in lines[0], "a Slack thread's id is not cut"
    status_at = [lines[0].index("answered"), lines[1].index("interrupted")]
    question_at = [lines[0].index("What is 1+1?"), lines[1].index("Why?")]
    totals_at = [line.index("(") for line in lines]
    assert len(set(status_at)) == len(set(question_at)) == len(set(totals_at)) == 1


def test_export_by_extension(tmp_path: Path) -> None:
    original = finished_trace()
    as_json = export_trace(original, tmp_path / "t.json")
    assert Trace.from_dict(json.loads(as_json.read_text())).to_dict() == original.to_dict()
    as_md = export_trace(original, str(tmp_path / "t.MD"))
    assert as_md.read_text().startswith(f"# Trace {original.id}")
    with pytest.raises(ValueError, match=r"must end in \.json"):
        export_trace(original, tmp_path / "t.txt")


async def test_in_memory_history_forgets_the_least_recently_used_conversation() -> None:
    store = InMemoryHistoryStore(max_turns=2, max_conversations=3)
    for name in ("a", "b", "c"):
        await store.append(name, {"role": "user", "content": name})
    assert await store.load("a")  # "a" is now the most recently used
    await store.append("d", {"role": "user", "content": "d"})
    assert len(store) == 3
    assert await store.load("b") == []  # the least recently used one went
    assert [m["content"] for m in await store.load("a")] == ["a"]
    for i in range(10_000):
        await store.append(f"dm-{i}", {"role": "user", "content": "hi"})
    assert len(store) == 3


# ---- channel settings -----------------------------------------------------------------------


class _Flaky:
    """A shared store that answers until it is told to fail."""

    def __init__(self) -> None:
        self.inner = InMemoryChannelSettings()
        self.down = False

    async def get(self, channel: str) -> dict[str, str]:
        if self.down:
            raise StoreUnavailable("down")
        return await self.inner.get(channel)

    async def put(self, channel: str, name: str, value: str | None) -> None:
        if self.down:
            raise StoreUnavailable("down")
        await self.inner.put(channel, name, value)


async def test_while_the_store_is_down_a_channel_keeps_its_settings_and_a_change_is_refused() -> (
    None
):
    shared = _Flaky()
    settings = ResilientChannelSettings(shared, health=StoreHealth(retry_after=0))
    await settings.put("c", "verbosity", "answer")
    await shared.inner.put("c", "other", "x")  # written by another process
    assert await settings.get("c") == {"verbosity": "answer", "other": "x"}
    shared.down = True
    assert await settings.get("c") == {"verbosity": "answer", "other": "x"}  # the last read
    with pytest.raises(StoreUnavailable):
        await settings.put("c", "verbosity", "full")
    assert await settings.get("c") == {"verbosity": "answer", "other": "x"}


def test_in_memory_settings_forget_the_least_recently_used_channel() -> None:
    settings = InMemoryChannelSettings(max_channels=2)
    settings.put_now("a", "verbosity", "answer")
    settings.put_now("b", "verbosity", "compact")
    settings.get_now("a")
    settings.put_now("c", "verbosity", "full")
    assert settings.get_now("b") == {} and settings.get_now("a") == {"verbosity": "answer"}


async def test_renewing_renews_last_at_the_end_of_its_time_not_a_beat_before() -> None:
    beats: list[float] = []
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def renew() -> None:
        beats.append(loop.time() - started)

    async with renewing(renew, every=0.1, until=0.25, what="x"):
        await asyncio.sleep(0.4)
    # Beats at 0.1, 0.2 and the last at 0.25 (a late loop may skip one: never the last).
    assert 2 <= len(beats) <= 3 and beats[-1] >= 0.25 - 0.01


async def test_renewing_ends_with_its_block_though_a_renewal_swallowed_the_cancellation() -> None:
    """``asyncio.wait_for`` before Python 3.12 (inside redis-py) can swallow a cancellation
    and return normally; the beat must end anyway, or the block's exit waits for it while it
    keeps a finished holder's lease alive for ``until``."""
    renewing_now = asyncio.Event()
    renewed: list[str] = []

    async def renew() -> None:  # the first swallows the cancellation, as that wait_for does
        renewed.append("start")
        renewing_now.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if len(renewed) > 1:
                raise

    async with asyncio.timeout(5):  # the old beat went on for ``until``: 600 s
        async with renewing(renew, every=0.01, until=600, what="x"):
            await renewing_now.wait()
    assert renewed == ["start"]
