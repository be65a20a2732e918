"""The ops endpoint of ``reactbot serve``: /healthz, /readyz and /metrics over real HTTP, the
metrics parsed with prometheus_client's own parser after a real run through the Slack fake,
/readyz with Redis stopped, the endpoint off, and a port already in use."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from slack_sdk.signature import SignatureVerifier

from bot.app import App, PlatformLink
from bot.cli import run_cli
from bot.config import Config, OpsConfig, RedisConfig, load_config
from bot.ops import Metrics, OpsServer, build_ops_app
from core.events import Finished
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, FakeUsage
from tests.fakes.slack_server import FakeSlack, message_text
from tests.integration.conftest import RedisServer

SECRET = "ops-test-signing-secret-0123"
ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SECRET}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float = 15.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - polls a server over HTTP
            await asyncio.sleep(0.05)


async def answers(url: str) -> bool:
    try:
        status, _, _ = await get(url)
    except aiohttp.ClientConnectionError:
        return False
    return status == 200


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels (prometheus_client's parser)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def slash_command(port: int, fake: FakeSlack, text: str) -> int:
    body = urllib.parse.urlencode(
        {
            "command": "/ask",
            "text": text,
            "user_id": "U1",
            "user_name": "ada",
            "channel_id": "C1",
            "team_id": "T1",
            "trigger_id": "trigger-1",
            "response_url": fake.response_url("cmd1"),
        }
    )
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature or "",
    }
    url = f"http://127.0.0.1:{port}/slack/events"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as r,
    ):
        return r.status


@contextlib.asynccontextmanager
async def serving(
    config_text: str, tmp_path: Path, *, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.Task[int]]:
    config = tmp_path / "c.yaml"
    config.write_text(config_text)
    argv = ["--config", str(config), "serve"]
    task = asyncio.create_task(run_cli(argv, env={**ENV, **(env or {})}))
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(15):
                await task


def slack_config(fake: FakeSlack, *, slack_port: int, ops: str) -> str:
    return (
        f"slack:\n  mode: http\n  port: {slack_port}\n  api_base_url: {fake.base_url.rstrip('/')}\n"
        "  update_interval: 0.2\n  cooldown_seconds: 0\n"
        f"ops:\n{ops}"
    )


async def test_metrics_after_a_real_slack_run_and_health_and_readiness(tmp_path: Path) -> None:
    slack_port, ops_port = free_port(), free_port()
    async with FakeSlack() as fake, FakeOpenAI() as model:
        model.reply("Thought: a tool I imagine.\nAction: made_up_tool[1]", usage=FakeUsage(10, 4))
        model.reply("Thought: arithmetic.\nAction: calculate[17*23+4]", usage=FakeUsage(20, 5))
        model.reply("Thought: done.\nAction: finish[17*23+4 = 395]", usage=FakeUsage(30, 6))
        fake.fail("chat.update", "ratelimited", status=429, retry_after=1)
        text = slack_config(
            fake, slack_port=slack_port, ops=f"  host: 127.0.0.1\n  port: {ops_port}\n"
        )
        env = {
            "REACTBOT_MODEL": "gpt-test",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test-key-123",
        }
        async with serving(text, tmp_path, env=env) as task:
            base = f"http://127.0.0.1:{ops_port}"
            await eventually(lambda: answers(f"{base}/healthz"))
            status, kind, body = await get(f"{base}/healthz")
            assert (status, json.loads(body)) == (200, {"ok": True})
            assert kind.startswith("application/json")
            await eventually(lambda: answers(f"{base}/readyz"))
            status, _, body = await get(f"{base}/readyz")
            assert json.loads(body) == {"ready": True, "platforms": ["slack"]}

            assert await slash_command(slack_port, fake, "What is 17*23+4?") == 200

            def finished() -> bool:
                roots = fake.roots("C1")
                return bool(roots) and "395" in message_text(roots[0])

            async def answered() -> bool:
                return finished()

            await eventually(answered)

            async def run_counted() -> bool:
                _, _, text = await get(f"{base}/metrics")
                found = samples(text)
                lag = found.get(("reactbot_event_loop_lag_seconds_count", ()), 0)
                return found.get(runs_key, 0) == 1 and lag > 0

            runs_key = ("reactbot_runs_total", (("outcome", "answered"), ("platform", "slack")))
            await eventually(run_counted)
            status, kind, text = await get(f"{base}/metrics")
            assert not task.done()
        assert status == 200 and kind.startswith("text/plain; version=0.0.4")
        found = samples(text)
        updates = fake.calls("chat.update", ok=True)
        model.assert_complete()

    assert all(
        family.name.startswith("reactbot_") for family in text_string_to_metric_families(text)
    )
    slack = (("platform", "slack"),)
    assert found[("reactbot_runs_in_flight", slack)] == 0
    # an unknown tool (model text is no label: "unknown"), calculate, then the answer
    assert found[("reactbot_run_steps_count", slack)] == 1
    assert found[("reactbot_run_steps_sum", slack)] == 3
    assert found[("reactbot_tool_calls_total", (("outcome", "ok"), ("tool", "calculate")))] == 1
    assert found[("reactbot_tool_calls_total", (("outcome", "error"), ("tool", "unknown")))] == 1
    assert not any("made_up_tool" in str(labels) for _, labels in found)
    gpt = (("model", "gpt-test"),)
    assert found[("reactbot_model_first_token_seconds_count", gpt)] == 3
    assert found[("reactbot_model_call_seconds_count", (*gpt, ("outcome", "ok")))] == 3
    assert found[("reactbot_model_tokens_total", (("direction", "input"), *gpt))] == 60
    assert found[("reactbot_model_tokens_total", (("direction", "output"), *gpt))] == 15
    # every edit the fake took, and the one 429 it answered
    assert found[("reactbot_live_edits_total", slack)] == len(updates) >= 1
    assert found[("reactbot_rate_limited_total", slack)] == 1
    assert found[("reactbot_redis_errors_total", ())] == 0


async def test_discord_edits_429s_readiness_and_a_clean_shutdown(tmp_path: Path) -> None:
    ops_port = free_port()
    fake = FakeDiscord(token="ops-token")
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    text = (
        f"discord:\n  api_base_url: {fake.api_base_url}\n  cooldown_seconds: 0\n"
        f"  edit_interval: 0.25\nops:\n  host: 127.0.0.1\n  port: {ops_port}\n"
    )
    base = f"http://127.0.0.1:{ops_port}"
    edits = f"/channels/{CHANNEL_ID}/messages/"
    try:
        async with serving(text, tmp_path, env={"DISCORD_TOKEN": "ops-token"}) as task:
            await eventually(lambda: answers(f"{base}/readyz"), within=30)
            fake.rate_limit_next("PATCH", edits, retry_after=0.3)
            await fake.dispatch("MESSAGE_CREATE", fake.message_create("What is 17*23+4?"))
            await fake.wait_for_call(lambda c: "**Totals**" in str(c.json), within=30)

            async def counted() -> bool:
                found = samples((await get(f"{base}/metrics"))[2])
                return found.get(runs, 0) == 1

            runs = ("reactbot_runs_total", (("outcome", "answered"), ("platform", "discord")))
            await eventually(counted)
            found = samples((await get(f"{base}/metrics"))[2])
            patched = [c for c in fake.calls if c.method == "PATCH" and edits in c.path]

            await fake.stop()  # the gateway goes away: no longer ready, still healthy

            async def not_ready() -> bool:
                status, _, body = await get(f"{base}/readyz")
                return status == 503 and json.loads(body)["reasons"] == ["discord: not connected"]

            await eventually(not_ready)
            assert (await get(f"{base}/healthz"))[0] == 200

            os.kill(os.getpid(), signal.SIGTERM)  # what `docker stop` sends
            async with asyncio.timeout(15):
                assert await task == 0
    finally:
        await fake.stop()
    discord = (("platform", "discord"),)
    assert found[("reactbot_live_edits_total", discord)] == sum(c.status < 300 for c in patched)
    assert found[("reactbot_live_edits_total", discord)] >= 1
    assert found[("reactbot_rate_limited_total", discord)] == 1 == fake.rate_limited
    assert found[("reactbot_runs_in_flight", discord)] == 0
    with pytest.raises(aiohttp.ClientConnectionError):  # the endpoint closed with serve
        await get(f"{base}/healthz")


async def test_readyz_says_503_with_the_reasons_when_redis_stops(
    redis_server: RedisServer,
) -> None:
    config = Config(redis=RedisConfig(url=redis_server.url))
    app = App.create(config)
    connected = True

    async def is_connected() -> bool:
        return connected

    app.platforms["discord"] = PlatformLink(is_connected, lambda: 0, lambda: 0)
    metrics = Metrics(app)
    web_app = build_ops_app(app, metrics=metrics, expected=["discord", "slack"])
    server = OpsServer(web_app, host="127.0.0.1", port=0, metrics=metrics)
    port = await server.start()
    base = f"http://127.0.0.1:{port}"
    try:
        status, _, body = await get(f"{base}/readyz")
        assert status == 503
        assert json.loads(body) == {"ready": False, "reasons": ["slack: not started yet"]}

        redis_server.kill()
        connected = False
        status, _, body = await get(f"{base}/readyz")
        assert status == 503
        reasons = json.loads(body)["reasons"]
        assert reasons[:2] == ["discord: not connected", "slack: not started yet"]
        assert len(reasons) == 3 and reasons[2].startswith("redis: Redis at 127.0.0.1:")
        assert "does not answer" in reasons[2]
        assert (await get(f"{base}/healthz"))[0] == 200  # the process itself still answers

        # a terminal run meanwhile: answered without memory, the failed Redis calls counted
        app.agent.observers.append(metrics.observer)
        events = [e async for e in app.agent.run("What is 6*7?", conversation="terminal")]
        assert isinstance(events[-1], Finished)
        found = samples((await get(f"{base}/metrics"))[2])
        terminal = ("reactbot_runs_total", (("outcome", "answered"), ("platform", "terminal")))
        assert found[terminal] == 1
        assert found[("reactbot_redis_errors_total", ())] >= 1
        assert app.health is not None
        assert found[("reactbot_redis_errors_total", ())] == app.health.failures
    finally:
        await server.stop()
        await app.aclose()


async def test_ops_disabled_serves_nothing_on_its_port(tmp_path: Path) -> None:
    slack_port, ops_port = free_port(), free_port()
    async with FakeSlack() as fake:
        text = slack_config(
            fake,
            slack_port=slack_port,
            ops=f"  enabled: false\n  host: 127.0.0.1\n  port: {ops_port}\n",
        )
        async with serving(text, tmp_path):
            await eventually(lambda: answers(f"http://127.0.0.1:{slack_port}/healthz"))
            with pytest.raises(aiohttp.ClientConnectionError):
                await get(f"http://127.0.0.1:{ops_port}/healthz")


async def test_a_port_in_use_is_one_clear_line_and_serve_exits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slack_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ops_port = taken.getsockname()[1]
        async with FakeSlack() as fake:
            text = slack_config(
                fake, slack_port=slack_port, ops=f"  host: 127.0.0.1\n  port: {ops_port}\n"
            )
            async with serving(text, tmp_path) as task:
                async with asyncio.timeout(15):
                    code = await task
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("ops:")]
    assert lines == [
        f"ops: cannot listen on 127.0.0.1:{ops_port}: the port is already in use (another "
        "reactbot, or another program). Set ops.port (or ops.host) to another, or "
        "ops.enabled: false"
    ]
    assert "Traceback" not in err
    assert fake.calls("chat.postMessage") == []


def test_the_ops_keys_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("ops:\n  enabled: false\n  port: 9100\n  host: 0.0.0.0\nlog_format: json\n")
    config = load_config(path, {})
    assert (config.ops.enabled, config.ops.port, config.ops.host) == (False, 9100, "0.0.0.0")
    assert config.log_format == "json"
    assert Config().ops == OpsConfig(enabled=True, host="127.0.0.1", port=9464)


async def test_other_pages_mount_on_the_same_server() -> None:
    app = App.create(Config())
    metrics = Metrics(app)

    def add_page(web_app: web.Application) -> None:
        async def page(_: web.Request) -> web.Response:
            return web.Response(text="a trace page")

        web_app.router.add_get("/traces/x", page)

    server = OpsServer(
        build_ops_app(app, metrics=metrics, extra=[add_page]), host="127.0.0.1", port=0
    )
    port = await server.start()
    try:
        assert (await get(f"http://127.0.0.1:{port}/traces/x"))[2] == "a trace page"
        status, _, body = await get(f"http://127.0.0.1:{port}/readyz")
        assert (status, json.loads(body)) == (200, {"ready": True, "platforms": []})
    finally:
        await server.stop()
        await app.aclose()


async def test_a_trace_link_posted_in_the_thread_opens_its_page_on_the_ops_server(
    tmp_path: Path,
) -> None:
    # issue 17's "done when": serve posts the link in the trace thread; the ops server serves it
    slack_port, ops_port = free_port(), free_port()
    base = f"http://127.0.0.1:{ops_port}"
    async with FakeSlack() as fake, FakeOpenAI() as model:
        model.reply("Thought: arithmetic.\nAction: calculate[6*7]")
        model.reply("Thought: done.\nAction: finish[6*7 = 42]")
        text = (
            slack_config(
                fake, slack_port=slack_port, ops=f"  host: 127.0.0.1\n  port: {ops_port}\n"
            )
            + f"web:\n  enabled: true\n  public_url: {base}\n"
        )
        env = {
            "REACTBOT_MODEL": "gpt-test",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test-key-123",
            "REACTBOT_LINK_SECRET": "a-link-secret-for-the-test-0123456789",
        }
        async with serving(text, tmp_path, env=env):
            await eventually(lambda: answers(f"{base}/healthz"))
            assert await slash_command(slack_port, fake, "What is 6*7?") == 200

            def linked() -> str | None:
                roots = fake.roots("C1")
                if not roots:
                    return None
                for reply in fake.replies("C1", roots[0].ts):
                    found = re.search(rf"<({re.escape(base)}/t/[^>|\s]+)>", str(reply.blocks))
                    if found:
                        return found.group(1)
                return None

            async def posted() -> bool:
                return linked() is not None

            await eventually(posted)
            link = linked()
            assert link is not None
            status, kind, page = await get(link.replace("&amp;", "&"))
            assert status == 200 and kind.startswith("text/html"), page[:200]
            assert "What is 6*7?" in page and "6*7 = 42" in page
            trace_id = urllib.parse.urlsplit(link).path.split("/")[2]
            status, _, refused = await get(f"{base}/t/{trace_id}")
            assert status == 403 and trace_id not in refused
            # Issue 47: a page whose name was rebound to this address gets no trace page,
            # even with the link; the probes and metrics answer whatever name they dial.
            rebound = {"Host": f"evil.example:{ops_port}"}
            async with aiohttp.ClientSession() as http:
                async with http.get(link.replace("&amp;", "&"), headers=rebound) as page_:
                    assert page_.status == 421 and "6*7" not in await page_.text()
                async with http.get(f"{base}/healthz", headers=rebound) as health:
                    assert health.status == 200
                named = {"Host": f"localhost:{ops_port}"}
                async with http.get(link.replace("&amp;", "&"), headers=named) as page_:
                    assert page_.status == 200
