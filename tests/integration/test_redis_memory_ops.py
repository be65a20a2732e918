"""What the operator is told about Redis's memory (issue 26): a warning at start when the
server's ``maxmemory-policy`` may evict keys with a TTL (claims, locks, slots), nothing when
``CONFIG`` is refused, and ``/readyz`` 503 with the reason above 90% of ``maxmemory``.

Each test runs its own ``redis-server`` and changes its settings freely."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from bot.app import App
from bot.config import Config, RedisConfig
from bot.ops import Metrics, OpsServer, build_ops_app
from tests.integration.conftest import RedisServer


async def config_set(url: str, **settings: str | int) -> None:
    client = aioredis.from_url(url)
    try:
        for name, value in settings.items():
            await client.config_set(name.replace("_", "-"), value)
    finally:
        await client.aclose()


@pytest.fixture
async def app(redis_server: RedisServer) -> AsyncIterator[App]:
    created = App.create(Config(redis=RedisConfig(url=redis_server.url)))
    yield created
    await created.aclose()


def policy_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "maxmemory-policy" in r.getMessage()
    ]


@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru", "volatile-ttl"])
async def test_a_policy_that_evicts_keys_with_a_ttl_is_warned_of_at_start(
    redis_server: RedisServer, app: App, caplog: pytest.LogCaptureFixture, policy: str
) -> None:
    await config_set(redis_server.url, maxmemory_policy=policy)
    with caplog.at_level(logging.DEBUG):
        await app.start()
    [warning] = policy_warnings(caplog)
    assert f"maxmemory-policy {policy}" in warning
    assert "answered twice" in warning and "noeviction" in warning
    assert f"127.0.0.1:{redis_server.port}" in warning


async def test_noeviction_is_not_warned_of(
    redis_server: RedisServer, app: App, caplog: pytest.LogCaptureFixture
) -> None:
    await config_set(redis_server.url, maxmemory_policy="noeviction")
    with caplog.at_level(logging.DEBUG):
        await app.start()
    assert policy_warnings(caplog) == []


async def test_a_server_that_refuses_config_gets_no_warning(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # A managed Redis: the bot's user may not run CONFIG (an ACL, as hosted services do).
    await config_set(redis_server.url, maxmemory_policy="allkeys-lru")
    admin = aioredis.from_url(redis_server.url)
    try:
        await admin.acl_setuser(
            "bot",
            enabled=True,
            nopass=True,
            keys=["*"],
            channels=["*"],
            commands=["+@all", "-config"],
        )
    finally:
        await admin.aclose()
    url = f"redis://bot:any@127.0.0.1:{redis_server.port}/0"
    app = App.create(Config(redis=RedisConfig(url=url)))
    try:
        with caplog.at_level(logging.DEBUG):
            await app.start()
        assert policy_warnings(caplog) == []
        assert any("cannot read maxmemory-policy" in r.getMessage() for r in caplog.records)
    finally:
        await app.aclose()


async def readyz(port: int) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, json.loads(await response.text())


async def test_readyz_is_503_above_90_percent_of_maxmemory(
    redis_server: RedisServer, app: App
) -> None:
    metrics = Metrics(app)
    server = OpsServer(build_ops_app(app, metrics=metrics), host="127.0.0.1", port=0)
    port = await server.start()
    try:
        assert await readyz(port) == (200, {"ready": True, "platforms": []})

        info = await app.redis_client.info("memory")
        await config_set(redis_server.url, maxmemory=int(info["used_memory"] * 1.05))
        status, body = await readyz(port)
        assert status == 503 and body["ready"] is False
        [reason] = body["reasons"]
        assert reason.startswith(f"redis: Redis at 127.0.0.1:{redis_server.port}/0 uses ")
        share = re.search(r"uses (\d+)% of its maxmemory", reason)
        assert share is not None and int(share.group(1)) >= 90 and "raise maxmemory" in reason

        await config_set(redis_server.url, maxmemory=0)  # no limit: nothing to be near
        assert (await readyz(port))[0] == 200
        await config_set(redis_server.url, maxmemory=int(info["used_memory"] * 3))
        assert (await readyz(port))[0] == 200  # a third used: ready
    finally:
        await server.stop()


async def test_writes_a_full_redis_refused_are_counted_on_metrics(
    redis_server: RedisServer, app: App
) -> None:
    metrics = Metrics(app)
    server = OpsServer(build_ops_app(app, metrics=metrics), host="127.0.0.1", port=0)
    port = await server.start()
    try:
        await config_set(redis_server.url, maxmemory_policy="noeviction", maxmemory=1)
        final = await app.agent.start("What is 6*7?", conversation="terminal").wait()
        assert final.trace.status == "answered"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        found = {
            s.name: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert app.health is not None and app.health.out_of_memory >= 1
        assert found["reactbot_redis_oom_total"] == app.health.out_of_memory
        assert found["reactbot_redis_errors_total"] >= app.health.out_of_memory
    finally:
        await server.stop()
