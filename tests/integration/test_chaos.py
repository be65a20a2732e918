"""Chaos, as an operator meets it (issue 26): two Slack replicas and one Discord process, each
a real ``reactbot serve`` on one Redis (this test's own prefix), against the strict fakes and
one OpenAI fake that every process asks. Five conversations are in flight when one Slack
replica and the Discord process are killed (``kill -9``: no shutdown, no final edit) and
started again at once. Then:

- every message that was live at the kill is final within 30 s of it: the answer, or
  "Interrupted ... Ask again." with its Stop button gone;
- no question is answered twice: Slack's retries of each event reach the other replica (one
  before the kill, one after), a Discord message is delivered again to the new process, and
  each question still has exactly one live message (the strict model script would also
  refuse a second run's requests);
- no conversation is blocked longer than 30 s: a follow-up asked in each killed conversation
  right after the kill starts (its first model request) within 30 s of the kill.

The default lease (``agent.lease_seconds``, 25 s) is what is tested: the 30 s is the promise
made with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from adapters.recovery import INTERRUPTED
from adapters.slack.blocks import STOP_ACTION_ID
from core.prompt import QUESTION_PREFIX
from tests.fakes.discord_limits import components_text
from tests.fakes.discord_server import CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import BOT_USER_ID, TEAM_ID, FakeSlack, Message, message_text
from tests.integration.test_hostile_serve import forget_keys, launch
from tests.integration.test_serve import free_port, wait_for_http

pytestmark = pytest.mark.slow

SECRET = "chaos-signing-secret"
BOUND = 30.0
"""Seconds: every live message final, every killed conversation free again, after a kill."""
DISCORD_STOP = "reactbot:stop"

JSON = dict[str, Any]


# ---- the model: one script per question, whatever order the processes ask in ---------------


def the_question(body: JSON) -> tuple[str, int]:
    """The question a model request is for (its last question message) and how many
    observations follow it (the step it asks for)."""
    messages = body.get("messages") or []
    asked = [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "user" and str(m.get("content")).startswith(QUESTION_PREFIX)
    ]
    if not asked:
        return "", 0
    after = messages[asked[-1] + 1 :]
    seen = sum(1 for m in after if str(m.get("content")).startswith("Observation:"))
    return str(messages[asked[-1]]["content"]), seen


def step(key: str, n: int) -> Callable[[JSON], bool]:
    def matches(body: JSON) -> bool:
        question, seen = the_question(body)
        return key in question and seen == n

    return matches


def first_request(model: FakeOpenAI, key: str) -> float | None:
    """When the first model request for the question holding ``key`` arrived."""
    for body, at in zip(model.requests, model.request_times, strict=True):
        if key in the_question(body)[0]:
            return at
    return None


# ---- Slack, as Slack sends it ----------------------------------------------------------------


async def slack_event(
    http: aiohttp.ClientSession, port: int, event_id: str, event: JSON, *, retry: int = 0
) -> None:
    """An Events API delivery, signed; ``retry`` > 0 sends it as Slack's retry number N."""
    body = json.dumps(
        {
            "type": "event_callback",
            "team_id": TEAM_ID,
            "api_app_id": "A1",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": {"team": TEAM_ID, **event},
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
        }
    )
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
            timestamp=stamp, body=body
        )
        or "",
    }
    if retry:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    url = f"http://127.0.0.1:{port}/slack/events"
    async with http.post(url, data=body.encode(), headers=headers) as response:
        assert response.status == 200, await response.text()


def mention(channel: str, user: str, ts: str, text: str, thread: str | None = None) -> JSON:
    event: JSON = {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "ts": ts,
        "text": f"<@{BOT_USER_ID}> {text}",
    }
    if thread is not None:
        event["thread_ts"] = thread
    return event


def slack_live(message: Message) -> bool:
    """The bot's message was a live one (it showed Stop at some point)."""
    return any(STOP_ACTION_ID in json.dumps(blocks) for _, _, blocks in message.versions)


def slack_final_at(message: Message, words: str) -> float | None:
    """When the message first showed ``words`` without a Stop button."""
    for at, text, blocks in message.versions:
        shown = text + json.dumps(blocks)
        if words in shown and STOP_ACTION_ID not in json.dumps(blocks):
            return at
    return None


# ---- Discord ---------------------------------------------------------------------------------


def discord_text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    return str(body.get("content") or "") + "\n".join(components_text(body.get("components") or []))


def discord_replies(fake: FakeDiscord, question_id: int) -> list[JSON]:
    """The bot's messages replying to the question (its live message: one per answer)."""
    return [
        fake.messages[mid]
        for mid in fake.created
        if str((fake.messages[mid].get("message_reference") or {}).get("message_id"))
        == str(question_id)
    ]


def discord_final_at(fake: FakeDiscord, message_id: str, words: str) -> float | None:
    for call in fake.calls:
        edit = call.method == "PATCH" and call.path.endswith(f"/messages/{message_id}")
        if edit and words in discord_text(call.json) and DISCORD_STOP not in json.dumps(call.json):
            return call.at
    return None


# ---- the processes ---------------------------------------------------------------------------


@dataclass
class Processes:
    tmp_path: Path
    running: dict[str, asyncio.subprocess.Process]
    starts: int = 0

    async def start(self, name: str, config: str, env: dict[str, str], platform: str) -> None:
        self.starts += 1
        home = self.tmp_path / f"{name}-{self.starts}"
        self.running[name] = await launch(
            self.tmp_path, config, env, "--platform", platform, home=home
        )

    async def kill(self, name: str) -> None:
        process = self.running[name]
        process.kill()
        await process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {log.parent.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.tmp_path.glob("*/serve.log"))
        )

    async def stop_all(self) -> None:
        """SIGTERM each live one (they must exit 0), then kill what is left."""
        alive = [p for p in self.running.values() if p.returncode is None]
        for process in alive:
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(20):
                await asyncio.gather(*(p.wait() for p in alive))
        for process in alive:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert all(p.returncode == 0 for p in alive), self.logs()


def slack_config(port: int, slack: FakeSlack) -> str:
    return (
        f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {slack.base_url}\n"
        "  update_interval: 0.3\n  cooldown_seconds: 0\n"
        "model:\n  name: m\n  max_retries: 0\nagent:\n  mode: text\n"
    )


def discord_config(fake: FakeDiscord) -> str:
    return (
        f"discord:\n  api_base_url: {fake.api_base_url}\n  cooldown_seconds: 0\n"
        f"  edit_interval: 0.25\n  allowed_guilds: [{GUILD_ID}]\n"
        "model:\n  name: m\n  max_retries: 0\nagent:\n  mode: text\n"
    )


async def until(
    predicate: Callable[[], object],
    *,
    within: float,
    what: str,
    logs: Callable[[], str] = lambda: "",
) -> None:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < within, f"{what}: not within {within} s\n{logs()}"
        await asyncio.sleep(0.05)


async def discord_ready(fake: FakeDiscord, identifies: int) -> None:
    """The process identified (the ``identifies``-th time) and has its guild."""
    async with asyncio.timeout(30):
        while fake.identifies < identifies:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the guild's GUILD_CREATE follows READY


# ---- the test --------------------------------------------------------------------------------

CHANNELS = {"alpha": "C1CHAOS1", "beta": "C2CHAOS2", "gamma": "C3CHAOS3"}
USERS = {"alpha": "U1ADA", "beta": "U2BOB", "gamma": "U3CYD"}
DISCORD_CHANNELS = {"delta": CHANNEL_ID, "epsilon": CHANNEL_ID + 10}
AUTHORS = {"delta": 1001, "epsilon": 1002}
STALL = {"chunks": 8, "stall_after": 4}


def script(model: FakeOpenAI) -> None:
    # Killed mid-run after a finished step (its trace keeps the step) ...
    for key in ("alpha", "delta"):
        model.reply(f"Thought: {key} first.\nAction: calculate[6*7]", when=step(key, 0))
        model.reply(f"Thought: {key} takes a long time, let me", when=step(key, 1), **STALL)
    # ... or while thinking its first step.
    for key in ("beta", "epsilon"):
        model.reply(f"Thought: {key} takes a long time, let me", when=step(key, 0), **STALL)
    # On the replica that lives: still writing when the other one dies, finished after.
    model.reply(
        "Thought: gamma is slow to say.\nFinal Answer: gamma is the third letter",
        chunks=3,
        delay=0.25,
        when=step("gamma", 0),
    )
    for key in ("alpha", "beta", "delta", "epsilon"):
        model.reply(
            f"Thought: easy.\nFinal Answer: {key} again, answered", when=step(f"{key} again", 0)
        )


async def test_killed_processes_leave_nothing_live_nothing_twice_nothing_blocked(
    tmp_path: Path, redis_url: str
) -> None:
    ports = {"a": free_port(), "b": free_port()}
    discord = FakeDiscord()
    for channel in DISCORD_CHANNELS.values():
        discord.add_channel(channel)
    await discord.start()
    processes = Processes(tmp_path, {})
    try:
        async with (
            FakeSlack(token="xoxb-chaos") as slack,
            FakeOpenAI(model="m") as model,
            aiohttp.ClientSession() as http,
        ):
            script(model)
            common = {
                "REDIS_URL": redis_url,
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "sk-test",
            }
            slack_env = {"SLACK_BOT_TOKEN": slack.token, "SLACK_SIGNING_SECRET": SECRET, **common}
            discord_env = {"DISCORD_TOKEN": discord.token, **common}
            for name in ("a", "b"):
                await processes.start(name, slack_config(ports[name], slack), slack_env, "slack")
            await processes.start("discord", discord_config(discord), discord_env, "discord")
            await asyncio.gather(
                *(wait_for_http(f"http://127.0.0.1:{p}/healthz") for p in ports.values()),
                discord_ready(discord, 1),
            )

            # Slack: alpha and beta on replica a, gamma on b; each event's retry reaches the
            # other replica once its first delivery is being answered.
            events = {
                key: (f"Ev{key}", mention(CHANNELS[key], USERS[key], f"1800000000.00010{i}", key))
                for i, key in enumerate(CHANNELS)
            }
            home = {"alpha": "a", "beta": "a", "gamma": "b"}
            other = {"a": "b", "b": "a"}

            def root(key: str) -> Message | None:
                roots = slack.roots(CHANNELS[key])
                return roots[0] if roots else None

            for key, (event_id, event) in events.items():
                await slack_event(http, ports[home[key]], event_id, event)
            await until(
                lambda: all((r := root(k)) is not None and slack_live(r) for k in CHANNELS),
                within=15,
                what="the Slack questions are live",
                logs=processes.logs,
            )
            for key, (event_id, event) in events.items():
                await slack_event(http, ports[other[home[key]]], event_id, event, retry=1)

            # Discord: delta and epsilon, each in its channel.
            asked = {
                key: discord.message_create(key, channel_id=DISCORD_CHANNELS[key], author_id=a)
                for key, a in AUTHORS.items()
            }
            for payload in asked.values():
                await discord.dispatch("MESSAGE_CREATE", payload)

            def discord_live(key: str) -> str | None:
                replies = discord_replies(discord, int(asked[key]["id"]))
                return replies[0]["id"] if replies else None

            thinking = ("alpha", "beta", "delta", "epsilon")
            stalls = {"alpha": 1, "delta": 1, "beta": 0, "epsilon": 0}  # the step that stalls
            await until(
                lambda: (
                    all(any(step(k, n)(body) for body in model.requests) for k, n in stalls.items())
                    and all(discord_live(k) for k in DISCORD_CHANNELS)
                ),
                within=15,
                what="every killed conversation is thinking",
                logs=processes.logs,
            )
            await asyncio.sleep(1.0)  # their live messages show the thinking

            # ---- the kill ------------------------------------------------------------------
            killed_at = time.monotonic()
            await asyncio.gather(processes.kill("a"), processes.kill("discord"))
            for key in thinking[:2]:
                r = root(key)
                assert r is not None and STOP_ACTION_ID in json.dumps(r.blocks), "left live"
            await processes.start("a", slack_config(ports["a"], slack), slack_env, "slack")
            await processes.start("discord", discord_config(discord), discord_env, "discord")

            # Follow-ups in every killed conversation, at once: alpha's to the replica that
            # lived, beta's to the restarted one, Discord's to the restarted process.
            alpha_root, beta_root = root("alpha"), root("beta")
            assert alpha_root is not None and beta_root is not None
            await slack_event(
                http,
                ports["b"],
                "Evalpha2",
                mention(
                    CHANNELS["alpha"],
                    USERS["alpha"],
                    "1800000001.000100",
                    "alpha again",
                    alpha_root.ts,
                ),
            )
            await asyncio.gather(
                wait_for_http(f"http://127.0.0.1:{ports['a']}/healthz"),
                discord_ready(discord, 2),
            )
            await slack_event(
                http,
                ports["a"],
                "Evbeta2",
                mention(
                    CHANNELS["beta"], USERS["beta"], "1800000001.000200", "beta again", beta_root.ts
                ),
            )
            # Slack retries the first questions again; Discord delivers delta once more.
            for key in ("alpha", "beta"):
                event_id, event = events[key]
                await slack_event(http, ports["a"], event_id, event, retry=2)
            await discord.dispatch("MESSAGE_CREATE", asked["delta"])
            follow = {
                key: discord.message_create(
                    f"{key} again", channel_id=DISCORD_CHANNELS[key], author_id=AUTHORS[key]
                )
                for key in DISCORD_CHANNELS
            }
            for payload in follow.values():
                await discord.dispatch("MESSAGE_CREATE", payload)

            # ---- what is left -----------------------------------------------------------
            finals: dict[str, float | None] = {}

            def all_final() -> bool:
                for key in thinking[:2]:
                    r = root(key)
                    finals[key] = r and slack_final_at(r, "Interrupted")
                r = root("gamma")
                finals["gamma"] = r and slack_final_at(r, "gamma is the third letter")
                for key in DISCORD_CHANNELS:
                    mid = discord_live(key)
                    finals[key] = mid and discord_final_at(discord, mid, INTERRUPTED)
                return all(finals.values())

            def shown() -> str:
                slack_now = {k: (r := root(k)) and (r.text, r.blocks) for k in CHANNELS}
                discord_now = {
                    k: (mid := discord_live(k)) and discord.messages[int(mid)]
                    for k in DISCORD_CHANNELS
                }
                edits = [
                    (
                        round(c.at - killed_at, 1),
                        c.method,
                        c.args.get("ts"),
                        c.error,
                        str(c.args)[:300],
                    )
                    for c in slack.records
                    if c.at > killed_at
                ]
                return f"{finals}\n{slack_now}\n{discord_now}\n{edits}\n{processes.logs()}"

            await until(all_final, within=BOUND + 5, what="every live message final", logs=shown)
            after_kill = {k: round(float(at or 0) - killed_at, 1) for k, at in finals.items()}
            print(f"\nfinal after the kill (s): {after_kill}")
            assert all(s <= BOUND for s in after_kill.values()), after_kill

            # Each follow-up started within the bound and was answered.
            await until(
                lambda: all(first_request(model, f"{k} again") for k in thinking),
                within=10,
                what="every follow-up started",
                logs=processes.logs,
            )
            started = {
                k: round(float(first_request(model, f"{k} again") or 0) - killed_at, 1)
                for k in thinking
            }
            print(f"follow-ups started after the kill (s): {started}")
            assert all(s <= BOUND for s in started.values()), started

            def followups_answered() -> bool:
                for key in ("alpha", "beta"):
                    r = root(key)
                    assert r is not None
                    thread = [m for m in slack.replies(CHANNELS[key], r.ts) if slack_live(m)]
                    if not any(slack_final_at(m, f"{key} again, answered") for m in thread):
                        return False
                for key, payload in follow.items():
                    mids = [m["id"] for m in discord_replies(discord, int(payload["id"]))]
                    if not any(
                        discord_final_at(discord, mid, f"{key} again, answered") for mid in mids
                    ):
                        return False
                return True

            await until(
                followups_answered,
                within=15,
                what="every follow-up answered",
                logs=processes.logs,
            )
            await asyncio.sleep(1.0)  # time for a second answer to show, were there one

            # ---- nothing twice ----------------------------------------------------------
            for key in CHANNELS:
                live_roots = [m for m in slack.roots(CHANNELS[key]) if slack_live(m)]
                assert len(live_roots) == 1, (key, [message_text(m) for m in live_roots])
            for key in ("alpha", "beta"):
                r = root(key)
                assert r is not None
                thread = [m for m in slack.replies(CHANNELS[key], r.ts) if slack_live(m)]
                assert len(thread) == 1, (key, [message_text(m) for m in thread])
            for key in DISCORD_CHANNELS:
                assert len(discord_replies(discord, int(asked[key]["id"]))) == 1, key
                assert len(discord_replies(discord, int(follow[key]["id"]))) == 1, key
            # Each scripted reply was asked for once: no run of a question came twice.
            model.assert_complete()
            await processes.stop_all()
    finally:
        for process in processes.running.values():
            if process.returncode is None:
                process.kill()
                await process.wait()
        await discord.stop()
        await forget_keys(tmp_path)
