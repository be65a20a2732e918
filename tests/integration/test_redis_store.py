"""The Redis stores against a real server: what only Redis has (round trips, trimming, key
lifetimes, leases, corrupt entries). What every backend does alike is in ``tests/stores``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest
from redis.client import NEVER_DECODE

from core.errors import StoreUnavailable
from core.history import Message
from core.memory import StepsMessage
from core.stores.redis import TRACE_FORMAT, RedisStores, connect, decode_trace
from core.trace import Trace, TraceStep
from tests.integration.conftest import RoundTrips


def turn(i: int) -> tuple[Message, Message]:
    return {"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}


# ---- history ------------------------------------------------------------------------------


async def test_load_and_append_are_one_round_trip_each(
    stores: RedisStores, round_trips: RoundTrips
) -> None:
    round_trips.reset()
    await stores.history.append("c1", *turn(1))
    assert round_trips.count == 1

    round_trips.reset()
    assert await stores.history.load("c1") == list(turn(1))
    assert round_trips.count == 1


async def test_history_keeps_the_last_turns_with_a_ttl(redis_url: str, redis_prefix: str) -> None:
    opened = connect(redis_url, prefix=redis_prefix, max_turns=3, history_ttl=1234)
    try:
        for i in range(5):
            await opened.history.append("c", *turn(i))
        loaded = await opened.history.load("c")
        assert [m["content"] for m in loaded] == ["q2", "a2", "q3", "a3", "q4", "a4"]
        ttl = await opened.client.ttl(opened.history.key("c"))
        assert 1200 < ttl <= 1234
    finally:
        await opened.aclose()


async def test_key_layout_and_conversations_are_separate(
    stores: RedisStores, redis_prefix: str
) -> None:
    await stores.history.append("discord:1:2", *turn(1))
    assert stores.history.key("discord:1:2") == f"{redis_prefix}history:discord:1:2"
    assert await stores.client.exists(f"{redis_prefix}history:discord:1:2") == 1
    assert await stores.history.load("discord:1:3") == []


async def test_unicode_round_trips_and_steps_are_dropped_unless_configured(
    stores: RedisStores, redis_url: str, redis_prefix: str
) -> None:
    with_steps: StepsMessage = {
        "role": "assistant",
        "content": "答案是 42 ✓",
        "steps": "calculator[6*7] -> 42",
    }
    await stores.history.append("plain", with_steps)
    assert await stores.history.load("plain") == [{"role": "assistant", "content": "答案是 42 ✓"}]

    keeping = connect(redis_url, prefix=redis_prefix, store_steps=True)
    try:
        await keeping.history.append("steps", with_steps)
        assert await keeping.history.load("steps") == [with_steps]
    finally:
        await keeping.aclose()


async def test_replace_and_clear(stores: RedisStores, round_trips: RoundTrips) -> None:
    for i in range(3):
        await stores.history.append("c", *turn(i))
    summary: Message = {"role": "system", "content": "Summary: q0..q1"}
    round_trips.reset()
    await stores.history.replace("c", [summary, *turn(2)])
    assert round_trips.count == 1
    assert await stores.history.load("c") == [summary, *turn(2)]
    await stores.history.clear("c")
    assert await stores.history.load("c") == []


async def test_corrupt_entries_are_skipped(stores: RedisStores) -> None:
    await stores.client.rpush(stores.history.key("c"), "not json", '{"role":"x"}')
    await stores.history.append("c", *turn(1))
    assert await stores.history.load("c") == list(turn(1))


# ---- traces -------------------------------------------------------------------------------


def make_trace(conversation: str, question: str, started_at: float) -> Trace:
    step = TraceStep(index=1, thought="t", action="calculator", action_input="1+1")
    return Trace(
        question=question,
        conversation=conversation,
        started_at=started_at,
        ended_at=started_at + 1,
        steps=[step],
        answer="2",
        status="answered",
    )


async def test_a_trace_lives_thirty_days_and_a_vote_keeps_its_time_and_format(
    stores: RedisStores, redis_prefix: str
) -> None:
    """Saved, read back and voted on: ``tests/stores`` (every backend). Here: the key's
    lifetime, which a vote leaves as it was, and the stored format a vote writes."""
    trace = make_trace("c", "q", time.time())
    await stores.traces.save(trace)
    key = f"{redis_prefix}trace:{trace.id}"
    await stores.client.expire(key, 3600)  # as if saved 29 days and 23 hours ago
    assert await stores.traces.vote(trace.id, "up", "ada")
    assert 3590 < await stores.client.ttl(key) <= 3600, "a vote does not extend its life"
    raw = await stores.client.execute_command("GET", key, **{NEVER_DECODE: True})
    voted = decode_trace(raw)
    assert raw[:1] == TRACE_FORMAT and [(v.value, v.by) for v in voted.votes] == [("up", "ada")]
    await stores.traces.save(make_trace("c", "q2", time.time()))
    fresh = await stores.traces.last("c")
    assert fresh is not None
    ttl = await stores.client.ttl(f"{redis_prefix}trace:{fresh.id}")
    assert 29 * 86400 < ttl <= 30 * 86400


async def test_trace_index_skips_expired_traces(stores: RedisStores, redis_prefix: str) -> None:
    trace = make_trace("c", "gone", time.time())
    await stores.traces.save(trace)
    await stores.client.delete(f"{redis_prefix}trace:{trace.id}")
    assert await stores.traces.list("c") == []


# ---- locks --------------------------------------------------------------------------------


async def test_lock_is_released_on_error_and_expires_after_its_lease(
    redis_url: str, redis_prefix: str
) -> None:
    opened = connect(redis_url, prefix=redis_prefix, lock_lease=0.3)
    try:
        with pytest.raises(RuntimeError):
            async with opened.locks.hold("c"):
                raise RuntimeError("boom")
        assert await opened.client.exists(f"{redis_prefix}lock:c") == 0

        # A holder that crashed without releasing: its key stays until the lease runs out.
        await opened.client.set(f"{redis_prefix}lock:c", "dead-process", px=300)
        waited: list[bool] = []
        started = asyncio.get_running_loop().time()
        async with opened.locks.hold("c", on_wait=lambda: waited.append(True)):
            elapsed = asyncio.get_running_loop().time() - started
        assert waited == [True]
        assert 0.2 < elapsed < 1.0
    finally:
        await opened.aclose()


async def test_a_live_holder_renews_its_lock_past_the_lease(
    redis_url: str, redis_prefix: str
) -> None:
    """A run waiting for a person outlasts the lease: the holder renews it, so another
    process keeps waiting until the holder lets go (a crashed one would free it in 0.3 s)."""
    holder = connect(redis_url, prefix=redis_prefix, lock_lease=0.3, lock_hold_at_most=30)
    other = connect(redis_url, prefix=redis_prefix, lock_lease=0.3)
    try:
        release = asyncio.Event()

        async def hold() -> None:
            async with holder.locks.hold("c"):
                await release.wait()

        task = asyncio.create_task(hold())
        await asyncio.sleep(0.05)
        entered = asyncio.create_task(_enter(other, "c"))
        await asyncio.sleep(1.0)  # more than three leases
        assert not entered.done()
        assert 0 < await holder.client.pttl(f"{redis_prefix}lock:c") <= 300
        release.set()
        await task
        async with asyncio.timeout(2):
            await entered
    finally:
        await holder.aclose()
        await other.aclose()


async def _enter(stores: RedisStores, conversation: str) -> None:
    async with stores.locks.hold(conversation):
        pass


# ---- claims -------------------------------------------------------------------------------


async def test_a_claim_lives_the_claim_ttl_or_its_own(
    stores: RedisStores, redis_prefix: str
) -> None:
    """Claimed once, released, lapsing: ``tests/stores``. Here: the keys' lifetimes."""
    assert await stores.claims.claim("evt-1")
    assert await stores.claims.claim("evt-2", ttl=2.5)
    assert await stores.client.ttl(f"{redis_prefix}event:evt-1") >= 600
    assert 2000 < await stores.client.pttl(f"{redis_prefix}event:evt-2") <= 2500
    await stores.claims.release("evt-1")
    assert await stores.client.exists(f"{redis_prefix}event:evt-1") == 0


# ---- errors -------------------------------------------------------------------------------


async def test_errors_are_store_unavailable_without_the_password() -> None:
    opened = connect("redis://user:s3cret-pw@127.0.0.1:1/0", prefix="x:")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await opened.history.load("c")
        assert "s3cret-pw" not in str(caught.value)
        assert "127.0.0.1:1" in str(caught.value)
    finally:
        await opened.aclose()


def test_importing_core_does_not_load_redis() -> None:
    code = "import core, core.stores, core.stores.resilient, core.memory, sys; print('redis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- channel settings -----------------------------------------------------------------------
