"""``serve_slack``: config mapped onto the adapter, HTTP mode served until cancelled,
and Socket Mode built (connecting needs Slack itself, so only construction is checked)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import pytest
from pydantic import SecretStr

from adapters.slack.bot import SlackBot
from adapters.slack.settings import SlackSettings
from bot.app import App
from bot.config import AgentConfig, ApprovalConfig, Config, Secrets, SlackConfig
from bot.policy import policy_for
from bot.serve_slack import serve_slack, slack_settings
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_serve import wait_for_http


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config(*, port: int, base_url: str) -> Config:
    return Config(
        slack=SlackConfig(
            mode="http",
            port=port,
            api_base_url=base_url.rstrip("/"),
            update_interval=0.5,
            allowed_channels=("C1",),
            admin_users=("UADMIN",),
            cooldown_seconds=2.0,
        ),
        secrets=Secrets(
            slack_bot_token=SecretStr("xoxb-test"), slack_signing_secret=SecretStr("shh")
        ),
    )


def test_config_maps_onto_the_adapter_settings() -> None:
    base = config(port=3999, base_url="http://127.0.0.1:1/api")
    settings = slack_settings(base)
    assert settings.bot_token == "xoxb-test" and settings.signing_secret == "shh"
    assert settings.base_url == "http://127.0.0.1:1/api/"  # slack_sdk needs the slash
    assert (settings.mode, settings.port, settings.update_interval) == ("http", 3999, 0.5)
    policy = policy_for(base, "slack")
    assert policy.access.places == frozenset({"C1"})
    assert policy.admin_users == frozenset({"UADMIN"})
    assert policy.approvers == "asker"  # agent.approval.approvers' default
    admins = base.model_copy(
        update={"agent": AgentConfig(approval=ApprovalConfig(approvers="admins"))}
    )
    assert policy_for(admins, "slack").approvers == "admins"


async def test_http_mode_serves_until_cancelled_then_shuts_down_cleanly() -> None:
    port = free_port()
    async with FakeSlack() as fake:
        app = App.create(config(port=port, base_url=fake.base_url))
        task = asyncio.get_running_loop().create_task(serve_slack(app))
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await app.aclose()


async def test_socket_mode_handler_is_built_from_the_app_token() -> None:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    app = App.create(Config())
    try:
        settings = SlackSettings(bot_token="xoxb-test", app_token="xapp-test", mode="socket")
        bot = SlackBot(
            app.agent, stores=app.stores, settings=settings, policy=policy_for(app.config, "slack")
        )
        handler = AsyncSocketModeHandler(bot.app, settings.app_token)
        assert handler.client.app_token == "xapp-test"
        assert handler.client.web_client is bot.client  # same base_url and retry handlers
        await handler.close_async()  # type: ignore[no-untyped-call]  # closes its session
        await bot.aclose()
    finally:
        await app.aclose()


def test_streaming_and_suggested_prompts_map_onto_the_adapter_settings() -> None:
    base = config(port=3999, base_url="http://127.0.0.1:1/api")
    assert slack_settings(base).streaming == "auto"
    legacy = base.model_copy(
        update={"slack": base.slack.model_copy(update={"use_native_streaming": False})}
    )
    assert slack_settings(legacy).streaming == "update"
    assert slack_settings(base).suggested_prompts[0] == (
        "What can you do?",
        "What can you do, and with which tools?",
    )


async def test_reactbot_serve_streams_a_dm_natively_through_slack(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import json
    import time

    from slack_sdk.signature import SignatureVerifier

    port = free_port()
    async with FakeSlack() as fake:
        served = config(port=port, base_url=fake.base_url)
        served = served.model_copy(
            update={
                "slack": served.slack.model_copy(
                    update={"allowed_channels": (), "use_native_streaming": True}
                )
            }
        )
        app = App.create(served)  # the offline demo model
        task = asyncio.get_running_loop().create_task(serve_slack(app))
        try:
            body = json.dumps(
                {
                    "type": "event_callback",
                    "team_id": "T0TEAM",
                    "api_app_id": "A1",
                    "event_id": "EvServe",
                    "event_time": int(time.time()),
                    "event": {
                        "type": "message",
                        "channel_type": "im",
                        "channel": "D1ADA",
                        "user": "U1ADA",
                        "text": "What is 17*23+4?",
                        "ts": "1710000000.000001",
                    },
                    "authorizations": [{"team_id": "T0TEAM", "user_id": "UB", "is_bot": True}],
                }
            )
            stamp = str(int(time.time()))
            signature = SignatureVerifier("shh").generate_signature(timestamp=stamp, body=body)
            headers = {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": stamp,
                "X-Slack-Signature": signature or "",
            }
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            async with aiohttp.ClientSession() as session:
                url = f"http://127.0.0.1:{port}/slack/events"
                async with session.post(url, data=body, headers=headers) as response:
                    assert response.status == 200
            async with asyncio.timeout(20):
                while not (fake.streams and not next(iter(fake.streams.values())).streaming):  # noqa: ASYNC110 - polls the fake
                    await asyncio.sleep(0.05)
            stream = next(iter(fake.streams.values()))
            assert stream.thread_ts == "1710000000.000001"
            assert "395" in stream.markdown
            assert stream.tasks and all(t["status"] == "complete" for t in stream.tasks.values())
            assert any(
                "slack.use_native_streaming is deprecated" in r.message for r in caplog.records
            )
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await app.aclose()


async def test_with_redis_the_streaming_tiers_are_shared_budgets(
    redis_url: str, redis_prefix: str
) -> None:
    from adapters.slack.streaming import TIERS
    from bot.config import RedisConfig
    from bot.serve_slack import stream_budgets

    app = App.create(Config(redis=RedisConfig(url=redis_url, prefix=redis_prefix)))
    try:
        budgets = stream_budgets(app)
        assert {m: b.limit for m, b in budgets.items()} == dict(TIERS)
        assert await budgets["chat.stopStream"].take(0) == 0.0  # answered by Redis
        await budgets["chat.stopStream"].done()
    finally:
        await app.aclose()
    without = App.create(Config())
    try:
        assert stream_budgets(without) == {}
    finally:
        await without.aclose()
