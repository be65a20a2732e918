"""The stores on a Sentinel-managed primary (``redis.sentinels``, ``redis.sentinel_service``):
a real primary, one replica and three sentinels (quorum 2). The primary is killed with a
lock held and a run registered: the sentinels promote the replica, the stores follow it
after a short retry, what was written before the kill is still there (an event claimed
before it is still claimed), and the lock is released at once, not after its lease."""

from __future__ import annotations

import asyncio
import gc
import io
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import run_cli
from core.errors import StoreUnavailable
from core.history import Message
from core.stores import RunRecord
from core.stores.redis import (
    CLAIM_REPLICA_WAIT,
    MAX_CONNECTIONS,
    RedisStores,
    RedisTarget,
    connect,
    parse_host_port,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.redis_topologies import (
    SERVICE,
    SentinelSet,
    command,
    sentinel_set,
    wait_for,
)

pytestmark = [
    pytest.mark.slow,  # the sentinels take 1-3 s to meet; a failover 1-4 s
    # A connection to the primary these tests kill can be left open by redis-py's sentinel
    # pool (on a failover it disconnects only the idle ones) and be collected later: its
    # ResourceWarning, raised in whatever test the collector then runs in, failed unrelated
    # tests now and then (on 3.12 most). Kept to this module and collected at its tests' end
    # (``_collected_here``); the leak itself is not yet found (CHANGELOG, issue 40).
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


@pytest.fixture(autouse=True)
def _collected_here() -> Iterator[None]:
    yield
    gc.collect()  # under this module's filter: the killed primary's connections end here


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    with sentinel_set(tmp_path) as deployment:
        yield deployment


def target(deployment: SentinelSet) -> RedisTarget:
    return RedisTarget(
        sentinels=tuple(parse_host_port(a) for a in deployment.addresses),
        sentinel_service=SERVICE,
    )


def claim_key(stores: RedisStores, event_id: str) -> str:
    return stores.history.key("").removesuffix("history:") + f"event:{event_id}"


def user(text: str) -> Message:
    return {"role": "user", "content": text}


async def until_it_works(action: object, *, within: float) -> float:
    """Retry ``action`` (an async callable) while the store is unavailable; seconds it took."""
    start = time.monotonic()
    while True:
        try:
            await action()  # type: ignore[operator]
        except StoreUnavailable:
            if time.monotonic() - start > within:
                raise
            await asyncio.sleep(0.1)
        else:
            return time.monotonic() - start


async def test_the_stores_follow_the_promoted_replica_after_the_primary_dies(
    sentinels: SentinelSet,
) -> None:
    stores = connect(target(sentinels), prefix=f"t{uuid.uuid4().hex[:8]}:", lock_lease=20)
    first_primary = sentinels.primary_port()
    assert first_primary == sentinels.primary.port
    try:
        await stores.history.append("c1", user("before"))
        # more commands at once than the pool has connections: they wait for one, as on one
        # server (redis-py's own Sentinel pool refuses the 101st: "Too many connections")
        burst = [stores.history.load(f"b{n}") for n in range(MAX_CONNECTIONS * 2)]
        assert await asyncio.gather(*burst) == [[]] * (MAX_CONNECTIONS * 2)
        assert sentinels.replica.process is not None
        sentinels.replica.process.send_signal(signal.SIGSTOP)  # acknowledges nothing
        start = time.monotonic()
        assert await stores.claims.claim("event-0") is True
        waited = time.monotonic() - start
        sentinels.replica.process.send_signal(signal.SIGCONT)
        assert CLAIM_REPLICA_WAIT * 0.9 <= waited < CLAIM_REPLICA_WAIT + 0.5  # WAIT, bounded
        assert await stores.claims.claim("event-1") is True  # WAITs for the replica:
        assert command(sentinels.replica.port, "EXISTS", claim_key(stores, "event-1")) == ":1\r\n"
        record = RunRecord(run_id="run-1", surface="slack", conversation="c1", owner="p1")
        await stores.runs.beat([record], at=time.time())
        held = stores.locks.hold("c1")
        await held.__aenter__()

        sentinels.primary.kill()  # mid-run: the lock held, the run registered
        took = await until_it_works(lambda: stores.history.append("c1", user("after")), within=15)
        await held.__aexit__(None, None, None)  # the run ends on the new primary

        assert sentinels.primary_port() == sentinels.replica.port
        assert await stores.history.load("c1") == [user("before"), user("after")]
        assert await stores.claims.claim("event-1") is False  # never answered twice
        assert await stores.claims.claim("event-2") is True
        assert await stores.runs.running("slack", "run-1")
        await stores.runs.end("slack", "run-1")
        start = time.monotonic()
        async with stores.locks.hold("c1"):  # released, not left to its 20 s lease
            assert time.monotonic() - start < 1
        print(f"the stores worked again {took:.1f} s after the primary was killed")
        assert took < 15
    finally:
        await stores.aclose()


async def test_the_app_finishes_a_run_the_primary_dies_in_and_then_follows_the_replica(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    """The config keys wired end to end: ``ask`` remembers the first answer through the
    sentinels; the primary killed while a third run waits on the model: that run still ends
    with its answer; the next one, after the failover, remembers the turns from before."""
    config = tmp_path / "config.yaml"
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    listed = ", ".join(f"'{a}'" for a in sentinels.addresses)
    config.write_text(
        f"redis:\n  sentinels: [{listed}]\n  sentinel_service: {SERVICE}\n  prefix: '{prefix}'\n"
    )

    async def ask(question: str, env: dict[str, str]) -> str:
        out = io.StringIO()
        argv = ["--config", str(config), "ask", "--conversation", "c1", question]
        code = await run_cli(argv, env=env, stdout=out)
        assert code == 0, out.getvalue()
        return out.getvalue()

    async with FakeOpenAI(model="m") as fake:
        fake.reply("Thought: greet\nAction: finish[Hello Ada.]")
        fake.reply("Thought: I remember\nAction: finish[You are Ada.]")
        fake.reply("Thought: slow\nAction: finish[Still here, Ada.]", delay=0.3)
        fake.reply("Thought: after\nAction: finish[Yes, Ada.]")
        env = {"REACTBOT_MODEL": "m", "OPENAI_BASE_URL": fake.base_url}
        await ask("I am Ada", env)
        out = await ask("Who am I?", env)
        assert "memory unavailable" not in out
        assert {"role": "assistant", "content": "Hello Ada."} in fake.requests[1]["messages"]
        wait_for(
            lambda: command(sentinels.replica.port, "LLEN", f"{prefix}history:c1") == ":4\r\n",
            "the history replicated",
            timeout=3,
        )

        async def kill_when_asked() -> None:
            while len(fake.requests) < 3:  # noqa: ASYNC110 - the fake has no event for it
                await asyncio.sleep(0.02)
            sentinels.primary.kill()

        killer = asyncio.create_task(kill_when_asked())
        out = await ask("Are you there?", env)
        await killer
        assert "Still here, Ada." in out  # the run ended, with its answer
        await asyncio.to_thread(
            wait_for, lambda: sentinels.primary_port() == sentinels.replica.port, "a failover"
        )
        await ask("Still me?", env)
        fourth = fake.requests[3]["messages"]
        assert {"role": "assistant", "content": "You are Ada."} in fourth
        assert {"role": "user", "content": "Question: I am Ada"} in fourth
