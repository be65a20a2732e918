"""Cooldowns, stop requests, decisions and rate budgets shared through the real Redis by
several "processes" (each its own client): what only Redis has (round trips, key lifetimes,
a listener that outlives a restart, requests in flight). What every backend does alike is in
``tests/stores``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from core.stores.redis import RedisRateBudget, RedisStores, connect
from tests.integration.conftest import RedisServer, RoundTrips


@pytest.fixture
async def other(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStores]:
    """A second process: its own client on the same server and prefix."""
    opened = connect(redis_url, prefix=redis_prefix)
    yield opened
    await opened.aclose()


async def eventually(predicate: Callable[[], bool], *, within: float) -> float:
    started = time.monotonic()
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110 - polls what a listener task appends
            await asyncio.sleep(0.005)
    return time.monotonic() - started


# ---- cooldowns ----------------------------------------------------------------------------


async def test_two_processes_share_one_window(stores: RedisStores, other: RedisStores) -> None:
    assert await stores.cooldowns.hit("slack:U1", 30.0) == 0.0
    left = await other.cooldowns.hit("slack:U1", 30.0)
    assert 29.0 < left <= 30.0, "the second process sees the first one's window"
    assert await other.cooldowns.hit("slack:U2", 30.0) == 0.0, "windows are per key"
    key = f"{stores.stops.channel[: -len('stop')]}cooldown:slack:U1"
    ttl_ms = await stores.client.pttl(key)
    assert 29_000 < ttl_ms <= 30_000, "a refusal does not restart the window"


async def test_a_hit_is_one_round_trip(stores: RedisStores, round_trips: RoundTrips) -> None:
    await stores.cooldowns.hit("warm", 5.0)  # loads the script once
    round_trips.reset()
    assert await stores.cooldowns.hit("a", 5.0) == 0.0
    assert round_trips.count == 1
    round_trips.reset()
    assert await stores.cooldowns.hit("a", 5.0) > 0
    assert round_trips.count == 1


async def test_zero_seconds_asks_nothing(stores: RedisStores, round_trips: RoundTrips) -> None:
    round_trips.reset()
    assert await stores.cooldowns.hit("a", 0) == 0.0
    assert round_trips.count == 0


# ---- stop requests ------------------------------------------------------------------------


async def test_a_request_from_one_process_reaches_another_within_half_a_second(
    stores: RedisStores, other: RedisStores
) -> None:
    heard: list[tuple[str, str]] = []
    async with other.stops.subscribe(lambda run, by, _: heard.append((run, by))):
        started = time.monotonic()
        await stores.stops.request("run42", by="U1ADA")
        await eventually(lambda: bool(heard), within=2.0)
        latency = time.monotonic() - started
    assert heard == [("run42", "U1ADA")]
    assert latency < 0.5, latency


async def test_a_subscriber_survives_idle_time_and_junk_on_the_channel(
    stores: RedisStores, other: RedisStores
) -> None:
    heard: list[tuple[str, str]] = []
    async with other.stops.subscribe(lambda run, by, _: heard.append((run, by))):
        await asyncio.sleep(1.3)  # longer than the poll and the client's socket timeout
        await stores.client.publish(stores.stops.channel, "not json")
        await stores.client.publish(stores.stops.channel, '{"run": 1}')
        await stores.stops.request("run1", by="ada")
        await eventually(lambda: bool(heard), within=2.0)
    assert heard == [("run1", "ada")]


async def test_leaving_the_subscription_ends_the_listener(
    stores: RedisStores, other: RedisStores
) -> None:
    heard: list[str] = []
    before = asyncio.all_tasks()
    async with other.stops.subscribe(lambda run, by, _: heard.append(run)):
        listeners = asyncio.all_tasks() - before
        assert len(listeners) == 1
    assert all(task.done() for task in listeners)
    await stores.stops.request("late", by="ada")
    await asyncio.sleep(0.1)
    assert heard == []


async def test_the_listener_reconnects_after_a_redis_restart(redis_server: RedisServer) -> None:
    listening, asking = (
        connect(redis_server.url, prefix="p:"),
        connect(redis_server.url, prefix="p:"),
    )
    heard: list[str] = []
    try:
        async with listening.stops.subscribe(lambda run, by, _: heard.append(run)):
            redis_server.kill()
            await asyncio.sleep(0.5)
            redis_server.start()
            # Pub/sub keeps nothing for a disconnected subscriber: ask until it is back.
            async with asyncio.timeout(8):
                while not heard:
                    await asyncio.sleep(0.1)
                    await asking.stops.request("after-restart", by="ada")
        assert set(heard) == {"after-restart"}
    finally:
        await listening.aclose()
        await asking.aclose()


async def test_subscribing_while_redis_is_down_does_not_block_start() -> None:
    down = connect("redis://127.0.0.1:1/0", prefix="x:")
    try:
        started = time.monotonic()
        async with down.stops.subscribe(lambda run, by, _: None):
            pass
        assert time.monotonic() - started < 3.0  # a blocking connect retries for ~4.7 s
    finally:
        await down.aclose()


# ---- approval decisions and allowances -----------------------------------------------------


async def test_a_decision_published_by_one_process_reaches_the_other(
    stores: RedisStores, other: RedisStores
) -> None:
    from core.approval import ApprovalBroker, Decision

    heard: list[tuple[tuple[str, int, int], Decision]] = []
    async with stores.decisions.subscribe(lambda key, d: heard.append((key, d))):
        await other.decisions.publish(
            ("run1", 2, 0), Decision("edit", "bob", input="x", reason="r")
        )
        await stores.client.publish(stores.decisions.channel, "not json")  # ignored
        await eventually(lambda: bool(heard), within=2.0)
    assert heard == [(("run1", 2, 0), Decision("edit", "bob", input="x", reason="r"))]
    broker = ApprovalBroker(stores.decisions)
    await broker.start()
    try:
        assert broker.pending(("run1", 2, 0)) is None
    finally:
        await broker.aclose()


async def test_an_allowance_is_shared_and_expires_with_the_conversation(
    stores: RedisStores, other: RedisStores
) -> None:
    assert await stores.allowances.allowed("c1", "save_note") is None
    await stores.allowances.allow("c1", "Save_Note", by="ada")
    assert await other.allowances.allowed("c1", "save_note") == "ada"
    assert await other.allowances.allowed("c2", "save_note") is None
    key = f"{stores.stops.channel[: -len('stop')]}allow:c1"
    assert 0 < await stores.client.ttl(key) <= 7 * 24 * 3600


async def test_a_pending_request_is_readable_from_another_process(
    stores: RedisStores, other: RedisStores
) -> None:
    from core.approval import ApprovalBroker, ApprovalRequest, Decision

    request = ApprovalRequest(
        "run9", "c", "ada", 2, 0, "t", "save_note", "x" * 3000, False, 5.0, True
    )
    here = ApprovalBroker(stores.decisions, stores.pending)
    there = ApprovalBroker(other.decisions, other.pending)
    await here.start()
    await there.start()
    try:
        waiting = asyncio.create_task(here(request))
        await eventually(lambda: here.pending(("run9", 2, 0)) is not None, within=2.0)
        await asyncio.sleep(0.05)
        assert await there.request(("run9", 2, 0)) == request  # e.g. to prefill an Edit modal
        await there.decide(("run9", 2, 0), Decision("deny", "bob"))
        assert (await waiting).by == "bob"
        assert await there.request(("run9", 2, 0)) is None  # dropped once decided
    finally:
        await here.aclose()
        await there.aclose()


# ---- a rate budget shared by replicas -----------------------------------------------------


def budgets(stores: RedisStores, other: RedisStores, **kw: float) -> list[RedisRateBudget]:
    return [
        RedisRateBudget(s.client, "m", prefix=s.stops.channel[: -len("stop")], **kw)  # type: ignore[arg-type]
        for s in (stores, other)
    ]


async def test_requests_stop_counting_per_after_their_answer(
    stores: RedisStores, other: RedisStores
) -> None:
    a, b = budgets(stores, other, limit=1, per=0.3)
    assert await a.take(0) == 0.0
    await asyncio.sleep(0.4)
    assert await b.take(0) > 0, "still in flight: counted however long it takes"
    await a.done()
    assert 0.2 < await b.take(0) <= 0.3
    await asyncio.sleep(0.35)
    assert await b.take(0) == 0.0


async def test_a_cancelled_take_gives_its_grant_back(
    stores: RedisStores, other: RedisStores
) -> None:
    a, b = budgets(stores, other, limit=1, per=60.0)
    taking = asyncio.ensure_future(a.take(0))
    await asyncio.sleep(0)  # the script is sent
    taking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await taking
    async with asyncio.timeout(2.0):  # given back once Redis has answered, not 60 s later
        while await b.take(0) > 0:  # noqa: ASYNC110 - polls Redis
            await asyncio.sleep(0.01)
    assert not a._mine, "nothing of the cancelled caller counts as this replica's"


async def test_a_replica_that_died_in_flight_stops_counting(
    stores: RedisStores, other: RedisStores
) -> None:
    a, b = budgets(stores, other, limit=1, per=0.1, in_flight_limit=0.1)
    assert await a.take(0) == 0.0  # and never done
    assert await b.take(0) > 0
    # its request stops counting per + in_flight_limit (0.2 s, on Redis' clock) after it was
    # taken: poll for that rather than guess how long a loaded machine takes to get there
    async with asyncio.timeout(5):
        while await b.take(0) != 0.0:  # noqa: ASYNC110 - the state is in Redis
            await asyncio.sleep(0.02)


# ---- token budgets shared by replicas -----------------------------------------------------


async def test_two_replicas_count_one_users_tokens(stores: RedisStores, other: RedisStores) -> None:
    from core.budgets import TokenBudgets
    from core.stores.redis import RedisUsageCounters
    from core.trace import Trace, TraceStep
    from tests.stores import refusal

    prefix = stores.stops.channel[: -len("stop")]
    a, b = (
        TokenBudgets(RedisUsageCounters(s.client, prefix=prefix), per_user=1000)
        for s in (stores, other)
    )
    trace = Trace(
        question="q", steps=[TraceStep(index=1, prompt_tokens=400, completion_tokens=200)]
    )
    await asyncio.gather(a.count("u", "c", trace), b.count("u", "c", trace))
    assert (await a.usage("u", "c")).user_tokens == 1200, "both replicas' runs counted"
    assert await refusal(b, "u", "c") is not None
    keys = [k async for k in stores.client.scan_iter(match=f"{prefix}usage:*")]
    assert len(keys) == 3  # the user's day, the channel's, and the user's runs of the day
    for key in keys:
        ttl = await stores.client.ttl(key)
        assert 0 < ttl <= 86_400, "gone at the end of its UTC day"


# ---- a channel's choices seen by every replica --------------------------------------------


async def test_a_channels_model_persona_and_tools_reach_the_other_replica(
    stores: RedisStores, other: RedisStores
) -> None:
    from adapters.channels import ChannelChoices
    from core.scripted import ScriptedModel
    from core.tools import FunctionTool, ToolRegistry

    registry = ToolRegistry()

    async def run(arg: str) -> str:
        return arg

    registry.add(FunctionTool("search", run, "search.", "search[x]"))
    registry.add(FunctionTool("calculate", run, "calculate.", "calculate[x]"))
    big = ScriptedModel([], model_name="big")
    a, b = (ChannelChoices(s.channel_settings, {"big": big}, registry) for s in (stores, other))
    await a.set_model("slack:T:C", "big")
    await a.set_persona("slack:T:C", "Be brief.")
    await a.toggle_tool("slack:T:C", "search")
    choice = await b.for_run("slack:T:C")
    assert choice.model is big and choice.persona == "Be brief."
    assert choice.tools is not None and choice.tools.names == ["calculate"]
