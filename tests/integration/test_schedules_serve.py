"""Issue 44's "done when", as an operator meets it: two ``reactbot serve`` processes on one
Redis against the strict fakes, a schedule added in chat by an admin with
``schedule.min_interval_seconds: 60`` that runs every minute, and one process killed with
``kill -9`` (a real SIGKILL of a real process) between two minutes: each minute is posted
exactly once, by whichever process is alive.

Schedule time runs ``SCALE`` times faster than real time (``REACTBOT_TEST_SCHEDULE_CLOCK``,
as ``bench/schedules.py`` shortens its minute): a minute is ``60 / SCALE`` real seconds, and
the processes' looks scale with it. The claims, the posting and the kill are real.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import aiohttp
from slack_sdk.signature import SignatureVerifier

from core.redis_store import create_client
from core.stores.redis.schedules import RedisSchedules
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import TEAM_ID, FakeSlack, message_text
from tests.integration.test_hostile_serve import forget_keys, launch, redis_prefix
from tests.integration.test_serve import free_port, wait_for_http

SECRET = "s3cret-signing"
CHANNEL = "C1GENERAL"
ADMIN = "U1ADA"
SCALE = 10.0
MINUTE = 60 / SCALE
"""Real seconds in a schedule minute."""
HEADER = "Scheduled by @ada · every 1 minute"


def clock_env() -> dict[str, str]:
    """Schedule time for every process of one test: the same origin, the same scale."""
    return {"REACTBOT_TEST_SCHEDULE_CLOCK": f"{int(time.time())}:{SCALE}"}


def slack_config(port: int, slack: FakeSlack) -> str:
    return (
        f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {slack.base_url.rstrip('/')}\n"
        f"  update_interval: 0.3\n  cooldown_seconds: 0\n  admin_users: [{ADMIN}]\n"
        "model:\n  name: m\nagent:\n  mode: text\n  lease_seconds: 3\n"
        "schedule:\n  min_interval_seconds: 60\n  default_timezone: UTC\n"
    )


async def slack_command(http: aiohttp.ClientSession, slack: FakeSlack, port: int, text: str) -> str:
    """``/ask-settings TEXT`` by the admin, signed as Slack signs it: the ephemeral ack."""
    body = urllib.parse.urlencode(
        {
            "command": "/ask-settings",
            "text": text,
            "user_id": ADMIN,
            "user_name": "ada",
            "channel_id": CHANNEL,
            "team_id": TEAM_ID,
            "trigger_id": slack.trigger(),
            "response_url": slack.response_url("sched"),
        }
    )
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature or "",
    }
    url = f"http://127.0.0.1:{port}/slack/events"
    async with http.post(url, data=body, headers=headers) as response:
        assert response.status == 200
        return str(json.loads(await response.text())["text"])


async def until(predicate: Callable[[], bool], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        await asyncio.sleep(0.05)


async def planned_minutes(redis_url: str, prefix: str, schedule_id: str) -> list[int]:
    """The planned minutes the schedule ran, as it recorded them (its last ten runs)."""
    client = create_client(redis_url)
    try:
        kept = await RedisSchedules(client, prefix=prefix).get(schedule_id)
    finally:
        await client.aclose()
    assert kept is not None
    assert all(r.outcome == "ok" for r in kept.runs), kept.runs
    return [r.planned // 60 for r in kept.runs]


async def test_slack_each_minute_is_posted_once_by_two_processes_one_killed(
    tmp_path: Path, redis_url: str
) -> None:
    ports = [free_port(), free_port()]
    async with (
        FakeSlack() as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        for n in range(12):
            model.reply(f"Thought: it is time.\nFinal Answer: tick {n}", chunks=3)
        env = {
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SECRET,
            "REDIS_URL": redis_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            **clock_env(),
        }
        processes = [
            await launch(tmp_path, slack_config(port, slack), env, "--platform", "slack",
                         home=tmp_path / f"p{i}")
            for i, port in enumerate(ports)
        ]  # fmt: skip
        try:
            for port in ports:
                await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            said = await slack_command(
                http, slack, ports[0], 'schedule add "every 1 minutes" What time is it?'
            )
            assert said.startswith("⏰ Scheduled ") and said.count(", ") >= 2, said
            schedule_id = said.split()[2].rstrip(":")

            def posted() -> list[str]:
                return [message_text(m) for m in slack.roots(CHANNEL) if HEADER in message_text(m)]

            def finished(count: int) -> bool:
                shown = posted()
                return len(shown) >= count and all("tick" in t for t in shown)

            await until(lambda: finished(2), within=4 * MINUTE + 20, what="two minutes posted")
            # Between two minutes: the second is final; kill -9 one of the two now.
            processes[0].kill()
            await processes[0].wait()
            await until(lambda: finished(5), within=4 * MINUTE + 20, what="the survivor posts on")
            await asyncio.sleep(MINUTE / 2)  # nothing more than one post per minute follows
            minutes = await planned_minutes(redis_url, redis_prefix(tmp_path), schedule_id)
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await forget_keys(tmp_path)

    shown = posted()
    assert len(minutes) == len(set(minutes)), f"a minute ran twice: {minutes}"
    assert minutes == list(range(minutes[0], minutes[0] + len(minutes))), f"missed: {minutes}"
    assert len(shown) == len(minutes), (len(shown), minutes)
    assert len(model.requests) == len(minutes), "one model run per minute, none twice"
    bodies = json.dumps([c.args for c in slack.records])
    assert f"<@{ADMIN}>" not in bodies, "the owner is never pinged"
