"""Issue 44's "done when", as an operator meets it: two ``reactbot serve`` processes on one
Redis against the strict fakes, a schedule added in chat by an admin with
``schedule.min_interval_seconds: 60`` that runs every minute, and one process killed with
``kill -9`` (a real SIGKILL of a real process) between two minutes: each minute is posted
exactly once, by whichever process is alive. "Between two minutes" is checked, not hoped for:
the kill comes once the current minute is claimed and answered, before the next one begins
(a process killed after its claim loses that minute by design: ``core.scheduler``).

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
from functools import partial
from pathlib import Path

import aiohttp
from slack_sdk.signature import SignatureVerifier

from adapters.recovery import INTERRUPTED
from core.schedules import ScheduleBook, ScheduleSettings
from core.stores.redis import RedisRunRegistry, create_client
from core.stores.redis.schedules import RedisSchedules
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import TEAM_ID, FakeSlack, message_text
from tests.fakes.telegram_server import FakeTelegram
from tests.integration.test_hostile_serve import forget_keys, launch, redis_prefix
from tests.integration.test_serve import free_port, wait_for_http
from tests.integration.test_telegram_bot import ALICE

SECRET = "s3cret-signing"
CHANNEL = "C1GENERAL"
ADMIN = "U1ADA"
DISCORD_ADMIN = 1001
SCALE = 15.0
MINUTE = 60 / SCALE
"""Real seconds in a schedule minute."""
HEADER = "Scheduled by @ada · every 1 minute"


CLOCK = "REACTBOT_TEST_SCHEDULE_CLOCK"


def clock_env() -> dict[str, str]:
    """Schedule time for every process of one test: the same origin, the same scale."""
    return {CLOCK: f"{int(time.time())}:{SCALE}"}


def minute_now(env: dict[str, str]) -> tuple[int, float]:
    """The schedule minute the processes given ``env`` are in now, and the real seconds
    left of it (their clock: ``bot.scheduling.test_clock``)."""
    origin = float(env[CLOCK].partition(":")[0])
    now = origin + (time.time() - origin) * SCALE
    return int(now // 60), (60 - now % 60) / SCALE


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


async def settled(
    redis_url: str,
    prefix: str,
    schedule_id: str,
    posts: Callable[[], int],
    calls: Callable[[], int],
    finished: Callable[[int], bool],
) -> tuple[list[int], int, int]:
    """The schedule paused (no minute is claimed from now on), then, once every minute
    claimed before has been posted and answered: the claimed minutes, the posts and the
    model calls. A post or a call never comes before its minute's claim, so both are then
    at most the claims; a minute posted twice would make them more."""
    client = create_client(redis_url)
    try:
        book = ScheduleBook(RedisSchedules(client, prefix=prefix), ScheduleSettings())
        assert await book.pause(schedule_id) is not None
    finally:
        await client.aclose()
    minutes = await planned_minutes(redis_url, prefix, schedule_id)
    await until(partial(finished, len(minutes)), within=2 * MINUTE + 20, what="posted")
    return minutes, posts(), calls()


async def planned_minutes(redis_url: str, prefix: str, schedule_id: str) -> list[int]:
    """The planned minutes of the schedule some process claimed (each claim is taken once,
    by one process: ``schedule:{id}:{minute}``), in order; its recorded runs all ok."""
    client = create_client(redis_url)
    try:
        kept = await RedisSchedules(client, prefix=prefix).get(schedule_id)
    finally:
        await client.aclose()
    assert kept is not None
    assert all(r.outcome == "ok" for r in kept.runs), kept.runs
    recorded = [r.planned // 60 for r in kept.runs]
    assert len(recorded) == len(set(recorded)), f"a minute ran twice: {recorded}"
    claimed, _ = await quiet_minutes(redis_url, prefix, schedule_id)
    return claimed


async def quiet_minutes(
    redis_url: str, prefix: str, schedule_id: str, surface: str = ""
) -> tuple[list[int], bool]:
    """The planned minutes of the schedule claimed so far, in order, and whether every one
    of them is over: its outcome recorded and no run in flight on ``surface``."""
    client = create_client(redis_url)
    try:
        pattern = f"{prefix}*schedule:{schedule_id}:*"
        keys = [k.decode() if isinstance(k, bytes) else k async for k in client.scan_iter(pattern)]
        kept = await RedisSchedules(client, prefix=prefix).get(schedule_id)
        in_flight = await RedisRunRegistry(client, prefix=prefix).count(surface) if surface else 0
    finally:
        await client.aclose()
    claimed = sorted(int(k.rsplit(":", 1)[1]) for k in keys)
    recorded = {r.planned // 60 for r in kept.runs} if kept is not None else set()
    return claimed, in_flight == 0 and recorded >= set(claimed)


async def kill_between_minutes(
    process: asyncio.subprocess.Process,
    *,
    env: dict[str, str],
    redis_url: str,
    prefix: str,
    schedule_id: str,
    surface: str,
    finished: Callable[[int], bool],
    after: int = 2,
) -> int:
    """``kill -9`` ``process`` once at least ``after`` minutes are claimed, posted, answered
    and over (no run in flight), the current minute among them, before the next minute
    begins (none is claimed before it does); the minutes claimed then. However slow the
    machine, no minute is in flight when the process dies."""
    deadline = time.monotonic() + (after + 4) * MINUTE + 30
    while True:
        claimed, over = await quiet_minutes(redis_url, prefix, schedule_id, surface)
        done = len(claimed) >= after and over and finished(len(claimed))
        minute, left = minute_now(env)  # no await from here to the kill
        if done and claimed[-1] == minute and left > 0.2:
            process.kill()
            break
        assert time.monotonic() < deadline, f"no quiet moment after {after} minutes: {claimed}"
        await asyncio.sleep(0.05)
    await process.wait()
    return len(claimed)


async def killed_and_settled(
    process: asyncio.subprocess.Process,
    *,
    env: dict[str, str],
    redis_url: str,
    prefix: str,
    schedule_id: str,
    surface: str,
    posts: Callable[[], int],
    calls: Callable[[], int],
    finished: Callable[[int], bool],
) -> tuple[list[int], int, int]:
    """One process killed between minutes, the survivor left to post two more, then the
    schedule paused and settled (``settled``): the claimed minutes, the posts, the calls."""
    claimed = await kill_between_minutes(
        process,
        env=env,
        redis_url=redis_url,
        prefix=prefix,
        schedule_id=schedule_id,
        surface=surface,
        finished=finished,
    )
    await until(lambda: finished(claimed + 2), within=2 * MINUTE + 30, what="the survivor posts on")
    return await settled(redis_url, prefix, schedule_id, posts, calls, finished)


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

            minutes, posts, calls = await killed_and_settled(
                processes[0],
                env=env,
                redis_url=redis_url,
                prefix=redis_prefix(tmp_path),
                schedule_id=schedule_id,
                surface="slack",
                posts=lambda: len(posted()),
                calls=lambda: len(model.requests),
                finished=finished,
            )
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await forget_keys(tmp_path)

    assert_once_per_minute(minutes, posts, calls)
    assert all("tick" in text for text in posted()), "each ended answered, none rewritten"
    bodies = json.dumps([c.args for c in slack.records])
    assert f"<@{ADMIN}>" not in bodies, "the owner is never pinged"


def assert_once_per_minute(minutes: list[int], posts: int, calls: int) -> None:
    assert minutes == list(range(minutes[0], minutes[0] + len(minutes))), f"missed: {minutes}"
    assert posts == len(minutes), f"{posts} posts for the minutes {minutes}"
    assert calls == len(minutes), "one model run per minute, none twice"


async def test_discord_each_minute_is_posted_once_by_two_processes_one_killed(
    tmp_path: Path, redis_url: str
) -> None:
    fake = FakeDiscord(token="serve-token")
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    config = (
        f"discord:\n  api_base_url: {fake.api_base_url}\n  cooldown_seconds: 0\n"
        f"  edit_interval: 0.25\n  layout: text\n  admin_users: [{DISCORD_ADMIN}]\n"
        "model:\n  name: m\nagent:\n  mode: text\n  lease_seconds: 3\n"
        "schedule:\n  min_interval_seconds: 60\n  default_timezone: UTC\n"
    )
    async with FakeOpenAI(model="m") as model:
        for n in range(12):
            model.reply(f"Thought: it is time.\nFinal Answer: tick {n}", chunks=3)
        env = {
            "DISCORD_TOKEN": "serve-token",
            "REDIS_URL": redis_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            **clock_env(),
        }
        ops = [free_port(), free_port()]
        processes = [
            await launch(
                tmp_path, config, env, "--platform", "discord", home=tmp_path / f"p{i}",
                ops_port=port,
            )
            for i, port in enumerate(ops)
        ]  # fmt: skip
        try:
            for port in ops:  # each ready (its guild arrived): whichever claims it answers
                await wait_for_http(f"http://127.0.0.1:{port}/readyz", within=40)
            payload = fake.interaction_create("reactbot", author_id=DISCORD_ADMIN)
            when = {"name": "when", "type": 3, "value": "every 1 minutes"}
            question = {"name": "question", "type": 3, "value": "What time is it?"}
            add = {"name": "add", "type": 1, "options": [when, question]}
            payload["data"]["options"] = [{"name": "schedule", "type": 2, "options": [add]}]
            await fake.dispatch("INTERACTION_CREATE", payload)
            call = await fake.wait_for_call(
                lambda c: c.path.endswith("/callback") and f"/{payload['id']}/" in c.path,
                within=20,
            )
            said = str(call.json["data"]["content"])
            assert said.startswith("⏰ Scheduled "), said
            schedule_id = said.split()[2].rstrip(":")

            def posted() -> list[int]:
                return [
                    mid
                    for mid in list(fake.created)
                    if fake.messages[mid]["channel_id"] == str(CHANNEL_ID)
                    and "Scheduled by @" in str(fake.messages[mid]["content"])
                ]

            def finished(count: int) -> bool:
                shown = posted()
                return len(shown) >= count and all(
                    "tick" in str(fake.messages[m]["content"]) for m in shown
                )

            minutes, posts, calls = await killed_and_settled(
                processes[0],
                env=env,
                redis_url=redis_url,
                prefix=redis_prefix(tmp_path),
                schedule_id=schedule_id,
                surface="discord",
                posts=lambda: len(posted()),
                calls=lambda: len(model.requests),
                finished=finished,
            )
            assert finished(posts), "each ended answered, none rewritten"
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await fake.stop()
            await forget_keys(tmp_path)
    assert_once_per_minute(minutes, posts, calls)


async def test_telegram_each_minute_is_posted_once_by_two_processes_one_killed(
    tmp_path: Path, redis_url: str
) -> None:
    """Each process polls its own fake (Telegram hands an update to one of them; two
    pollers of one bot would be refused 409): the posts of both are counted. In the
    admin's private chat: a group takes 20 messages a minute, fewer than a 6-second minute's
    runs need."""
    async with (
        FakeTelegram() as first,
        FakeTelegram() as second,
        FakeOpenAI(model="m") as model,
    ):
        second.chats.add(ALICE)  # the chat exists there too (the first sees her speak)
        for n in range(12):
            model.reply(f"Thought: it is time.\nFinal Answer: tick {n}", chunks=3)
        processes = []
        clock = clock_env()  # one origin for both: they must agree on every minute
        for i, fake in enumerate((first, second)):
            config = (
                f"telegram:\n  api_base_url: {fake.base_url}\n  cooldown_seconds: 0\n"
                f"  admins: [{ALICE}]\n"
                "model:\n  name: m\nagent:\n  mode: text\n  lease_seconds: 3\n"
                "schedule:\n  min_interval_seconds: 60\n  default_timezone: UTC\n"
            )
            env = {
                "TELEGRAM_BOT_TOKEN": fake.token,
                "REDIS_URL": redis_url,
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "sk-test",
                **clock,
            }
            home = tmp_path / f"p{i}"
            processes.append(
                await launch(tmp_path, config, env, "--platform", "telegram", home=home)
            )

        def posted() -> list[str]:
            return [
                m.text
                for fake in (first, second)
                for m in fake.bot_messages(ALICE)
                if "Scheduled by" in m.text
            ]

        def finished(count: int) -> bool:
            shown = posted()
            return len(shown) >= count and all("tick" in t for t in shown)

        try:
            first.user_says(ALICE, '/schedule add "every 1 minutes" What time is it?')
            await until(
                lambda: any(m.text.startswith("⏰ Scheduled ") for m in first.bot_messages(ALICE)),
                within=40,
                what="the schedule added",
            )
            said = next(m.text for m in first.bot_messages(ALICE) if m.text.startswith("⏰ Sch"))
            schedule_id = said.split()[2].rstrip(":")
            minutes, posts, calls = await killed_and_settled(
                processes[0],
                env=clock,
                redis_url=redis_url,
                prefix=redis_prefix(tmp_path),
                schedule_id=schedule_id,
                surface="telegram",
                posts=lambda: len(posted()),
                calls=lambda: len(model.requests),
                finished=finished,
            )
            assert finished(posts), "each ended answered, none rewritten"
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await forget_keys(tmp_path)
    assert_once_per_minute(minutes, posts, calls)


async def test_a_scheduled_run_whose_process_dies_mid_answer_is_finished_by_the_next(
    tmp_path: Path, redis_url: str
) -> None:
    """Crash recovery covers a scheduled run as any answer: its process killed while the
    model is still writing, the next process finishes the message as interrupted."""
    port = free_port()
    async with (
        FakeSlack() as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        model.reply("Thought: this will take a very long time, let me", chunks=8, stall_after=4)
        env = {
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SECRET,
            "REDIS_URL": redis_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            **clock_env(),
        }
        config = slack_config(port, slack)
        first = await launch(tmp_path, config, env, "--platform", "slack", home=tmp_path / "p0")
        second = None
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            said = await slack_command(http, slack, port, 'schedule add "in 1 minutes" Think.')
            assert said.startswith("⏰ Scheduled "), said

            def root() -> str:
                roots = slack.roots(CHANNEL)
                return message_text(roots[0]) if len(roots) == 1 else ""

            await until(lambda: "this will take" in root(), within=MINUTE + 30, what="thinking")
            assert HEADER.replace("every 1 minute", "in 1 minute") in root(), root()
            first.kill()
            await first.wait()
            second = await launch(
                tmp_path, config, env, "--platform", "slack", home=tmp_path / "p1"
            )
            await until(lambda: INTERRUPTED in root(), within=40, what="finished by the next")
        finally:
            for process in (first, second):
                if process is not None and process.returncode is None:
                    process.kill()
                    await process.wait()
            await forget_keys(tmp_path)
    assert len(slack.roots(CHANNEL)) == 1, "finished in place, not posted again"
    assert f"<@{ADMIN}>" not in json.dumps([c.args for c in slack.records])
