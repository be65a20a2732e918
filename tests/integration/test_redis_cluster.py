"""The stores on a real three-node Redis Cluster (``redis.cluster: true``): every store works,
each conversation's keys (and each surface's run registry) share one hash slot so their
scripts and transactions run on one node, the keys of many conversations spread over the
nodes, and the bound on traces holds though traces lie in other slots than their index."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio.cluster import RedisCluster

from bot.cli import run_cli
from core.history import Message
from core.stores import RunRecord
from core.stores.redis import RedisStores, RedisTarget, connect
from core.tools.lookup import Passage
from core.trace import Trace
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.conftest import cancellations_lost
from tests.integration.redis_topologies import Cluster, cluster, command
from tests.stores import check_budget_holds

pytestmark = pytest.mark.slow  # a cluster takes 1-2 s to form


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture
async def on_cluster(redis_cluster: Cluster) -> AsyncIterator[RedisStores]:
    stores = connect(
        RedisTarget(url=redis_cluster.url, cluster=True),
        prefix=f"t{uuid.uuid4().hex[:8]}:",
        max_traces=3,
    )
    await stores.ping()
    yield stores
    await stores.aclose()


def user(text: str) -> Message:
    return {"role": "user", "content": text}


CONVERSATIONS = [f"slack:T1:C{i}:17{i}.5" for i in range(24)] + [
    "web:}{odd",
    "discord:{42}",
    "telegram:ещё:会話",
]


async def test_a_conversations_keys_share_one_slot_and_conversations_spread(
    on_cluster: RedisStores,
) -> None:
    client = on_cluster.client
    assert isinstance(client, RedisCluster)
    slots = set()
    for conversation in CONVERSATIONS:
        await on_cluster.history.append(conversation, user("hi"))
        await on_cluster.files.add(conversation, [Passage("a.md", ("A",), "text")])
        await on_cluster.allowances.allow(conversation, "calculate", by="ada")
        await on_cluster.traces.save(Trace(question="q", conversation=conversation))
        async with on_cluster.locks.hold(conversation):
            prefix = on_cluster.history.key(conversation).split("history:")[0]
            keys = [
                on_cluster.history.key(conversation),
                on_cluster.files.key(conversation),
                f"{prefix}allow:{{{conversation}}}",
                f"{prefix}traces:{{{conversation}}}",
                f"{prefix}lock:{{{conversation}}}",
            ]
            for key in keys:  # each written where the cluster says its slot lives
                assert await client.exists(key) == 1, key
            conversation_slots = {client.keyslot(k) for k in keys}
            assert len(conversation_slots) == 1, (conversation, keys)
            slots |= conversation_slots
    owners = set()
    for slot in slots:
        node = client.nodes_manager.get_node_from_slot(slot)
        owners.add(node.name)
    assert len(owners) == 3, "27 conversations should land on every node"


async def test_every_store_works_on_a_cluster(on_cluster: RedisStores) -> None:
    s = on_cluster
    await s.history.append("c1", user("a"), user("b"))
    await s.history.replace("c1", [user("summary")])  # MULTI/EXEC on one key
    assert await s.history.load("c1") == [user("summary")]

    saved = []
    for i in range(5):
        trace = Trace(question=f"q{i}", conversation="c1" if i % 2 else "c2")
        trace.started_at = time.time() - 100 + i
        await s.traces.save(trace)
        saved.append(trace)
    recent = await s.traces.recent(limit=10)
    assert [t.question for t in recent] == ["q4", "q3", "q2"]  # max_traces 3: two dropped
    assert await s.traces.get(saved[0].id) is None and await s.traces.get(saved[1].id) is None
    assert [t.question for t in await s.traces.list("c1")] == ["q3"]  # q1's trace is gone
    assert (await s.traces.get(saved[4].id)) is not None

    assert await s.claims.claim("e1") is True
    assert await s.claims.claim("e1") is False
    assert await s.cooldowns.hit("ada", 5) == 0
    assert await s.cooldowns.hit("ada", 5) > 0
    assert await s.slots.take("ada", "r1", limit=1, lease=10) is True
    assert await s.slots.take("ada", "r2", limit=1, lease=10) is False
    await s.slots.give_back("ada", "r1")

    record = RunRecord(
        run_id="run-1", surface="slack", conversation="c1", owner="p1", where={"ts": "17.1"}
    )
    await s.runs.beat([record], at=100.0)
    assert await s.runs.running("slack", "run-1")
    assert await s.runs.orphans("slack", silent_since=200.0) == ["run-1"]
    claimed = await s.runs.claim("slack", "run-1")  # a script over the surface's two keys
    assert claimed is not None and claimed.conversation == "c1"
    assert await s.runs.claim("slack", "run-1") is None
    await s.runs.beat([record], at=300.0)
    await s.runs.end("slack", "run-1")  # MULTI/EXEC over the same two keys
    assert not await s.runs.running("slack", "run-1")

    assert await s.usage.add("2026-12-03:user:ada", 10, expire_at=4102444800) == 10
    await s.usage.add("2026-12-03:channel:c1", 7, expire_at=4102444800)
    assert await s.usage.get(["2026-12-03:user:ada", "2026-12-03:channel:c1", "none"]) == [
        10,
        7,
        0,
    ]
    await s.channel_settings.put("C1", "mode", "plain")
    assert await s.channel_settings.get("C1") == {"mode": "plain"}

    used, _ = await s.memory()
    assert used > 0
    assert await s.eviction_policy() == "noeviction"


async def test_stop_requests_reach_another_process_on_the_cluster(
    redis_cluster: Cluster,
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    target = RedisTarget(url=redis_cluster.url, cluster=True)
    one, two = connect(target, prefix=prefix), connect(target, prefix=prefix)
    heard: list[tuple[str, str]] = []
    got = asyncio.Event()

    def on_stop(run_id: str, by: str, by_id: str) -> None:
        heard.append((run_id, by))
        got.set()

    try:
        async with two.stops.subscribe(on_stop):
            await one.stops.request("run-9", by="ada")
            async with asyncio.timeout(3):
                await got.wait()
    finally:
        await one.aclose()
        await two.aclose()
    assert heard == [("run-9", "ada")]


async def test_the_app_remembers_a_conversation_on_a_cluster(
    redis_cluster: Cluster, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    config.write_text(f"redis:\n  cluster: true\n  prefix: '{prefix}'\n")
    async with FakeOpenAI(model="m") as fake:
        fake.reply("Thought: greet\nAction: finish[Hello Ada.]")
        fake.reply("Thought: I remember\nAction: finish[You are Ada.]")
        env = {
            "REDIS_URL": redis_cluster.url,
            "REACTBOT_MODEL": "m",
            "OPENAI_BASE_URL": fake.base_url,
        }
        for question in ("I am Ada", "Who am I?"):
            out = io.StringIO()
            code = await run_cli(
                ["--config", str(config), "ask", "--conversation", "c1", question],
                env=env,
                stdout=out,
            )
            assert code == 0, out.getvalue()
        assert "You are Ada." in out.getvalue()
        assert "memory unavailable" not in out.getvalue()
        assert {"role": "assistant", "content": "Hello Ada."} in fake.requests[1]["messages"]


async def test_on_one_server_keys_keep_the_names_earlier_versions_wrote(
    stores: RedisStores, redis_prefix: str
) -> None:
    """No hash tags off a cluster: history, files and allowances written under the old names
    (by the version before this one) read back, and new writes land under the same names."""
    client = stores.client
    await client.rpush(f"{redis_prefix}history:slack:T1:C1", '{"role":"user","content":"old"}')
    await client.hset(f"{redis_prefix}allow:slack:T1:C1", "calculate", "ada")
    assert await stores.history.load("slack:T1:C1") == [user("old")]
    assert await stores.allowances.allowed("slack:T1:C1", "calculate") == "ada"
    await stores.history.append("slack:T1:C1", user("new"))
    assert await client.llen(f"{redis_prefix}history:slack:T1:C1") == 2
    assert stores.history.key("slack:T1:C1") == f"{redis_prefix}history:slack:T1:C1"


async def test_readiness_figures_and_the_eviction_warning_look_at_every_primary(
    on_cluster: RedisStores, redis_cluster: Cluster
) -> None:
    """One node with a maxmemory (the others unbounded) and one evicting: ``memory`` gives
    that node's figures, ``eviction_policy`` the evicting one, whichever node ``url`` names."""
    last = redis_cluster.nodes[-1].port
    try:
        command(last, "CONFIG", "SET", "maxmemory", "200mb")
        command(last, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        used, limit = await on_cluster.memory()
        assert limit == 200 * 1024 * 1024 and 0 < used < limit
        assert await on_cluster.eviction_policy() == "allkeys-lru"
    finally:
        command(last, "CONFIG", "SET", "maxmemory", "0")
        command(last, "CONFIG", "SET", "maxmemory-policy", "noeviction")


async def test_a_command_on_the_cluster_cancelled_at_any_point_is_cancelled(
    on_cluster: RedisStores,
) -> None:
    """The cluster's connections are ours too (redis-py's ``RedisCluster`` takes no
    connection class): its own writes limit themselves with ``asyncio.wait_for``, which
    before Python 3.12 loses a cancellation arriving as the write completes."""
    client = on_cluster.client
    key = f"t{uuid.uuid4().hex[:8]}:flight"
    lost = await cancellations_lost(client, key)
    await client.delete(key)
    assert lost == []


async def test_budget_holds_keep_their_rule_on_a_cluster(on_cluster: RedisStores) -> None:
    """Each counter and its holds share a slot, so each limit is held in one script; the
    counters of one question lie in many slots (held one after another)."""
    await check_budget_holds(on_cluster.usage, asyncio.sleep, day=uuid.uuid4().hex)
    client = on_cluster.client
    assert isinstance(client, RedisCluster)
    slots = {client.keyslot(k) for k in on_cluster.usage._pair("2026-12-03:user:ada")}
    assert len(slots) == 1
