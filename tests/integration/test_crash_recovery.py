"""A replica killed mid-answer (``kill -9``), as an operator meets it: two ``reactbot serve``
processes in turn on one Redis, Slack's strict fake, the OpenAI fake whose first reply
stalls. The next process finds the answer its dead predecessor left, within the lease: the
message says it was interrupted (no Stop button left), the partial trace is stored as
``interrupted``, the question is in the history, and the conversation answers the next
question at once instead of waiting for a dead run's lock."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import uuid
from pathlib import Path

import aiohttp
from slack_sdk.signature import SignatureVerifier

from adapters.recovery import INTERRUPTED
from adapters.slack.blocks import RETRY_ACTION_ID, STOP_ACTION_ID
from adapters.words import NOT_RUNNING
from core.stores.redis import RedisHistoryStore, RedisTraceStore, create_client
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import TEAM_ID, FakeSlack, message_text
from tests.integration.test_hostile_serve import forget_keys, launch, redis_prefix
from tests.integration.test_serve import free_port, wait_for_http

SECRET = "s3cret-signing"
CHANNEL = "C1GENERAL"
LEASE = 3


def config(port: int, slack: FakeSlack) -> str:
    return (
        f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {slack.base_url.rstrip('/')}\n"
        "  update_interval: 0.3\n  cooldown_seconds: 0\n"
        f"model:\n  name: m\nagent:\n  mode: text\n  lease_seconds: {LEASE}\n"
    )


async def ask(http: aiohttp.ClientSession, slack: FakeSlack, port: int, text: str) -> None:
    body = urllib.parse.urlencode(
        {
            "command": "/ask",
            "text": text,
            "user_id": "U1ADA",
            "user_name": "ada",
            "channel_id": CHANNEL,
            "team_id": TEAM_ID,
            "trigger_id": slack.trigger(),
            "response_url": slack.response_url(text[:8]),
        }
    )
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
            timestamp=stamp, body=body
        )
        or "",
    }
    async with http.post(f"http://127.0.0.1:{port}/slack/events", data=body, headers=headers) as r:
        assert r.status == 200


async def press(
    http: aiohttp.ClientSession,
    port: int,
    value: str,
    *,
    action: str = STOP_ACTION_ID,
    message_ts: str = "1.0",
) -> None:
    """A click on a button of the message ``message_ts`` in CHANNEL, as Slack signs it."""
    payload = {
        "type": "block_actions",
        "user": {"id": "U1ADA"},
        "team": {"id": TEAM_ID},
        "channel": {"id": CHANNEL},
        "trigger_id": f"press.{uuid.uuid4().hex}",  # Slack mints one per press
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": message_ts},
        "actions": [{"type": "button", "action_id": action, "block_id": "b", "value": value}],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature or "",
    }
    async with http.post(f"http://127.0.0.1:{port}/slack/events", data=body, headers=headers) as r:
        assert r.status == 200


async def until(predicate: object, *, within: float, what: str) -> float:
    """Seconds until ``predicate()`` holds (polled); fails after ``within``."""
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() - started < within, f"{what}: not within {within} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_the_answer_a_killed_replica_left_is_finished_by_the_next(
    tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    async with (
        FakeSlack() as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        model.reply("Thought: first the product.\nAction: calculate[6*7]", chunks=8)
        model.reply("Thought: this will take a very long time, let me", chunks=8, stall_after=4)
        model.reply("Thought: easy.\nFinal Answer: 42", chunks=6)
        model.reply("Thought: asked again.\nFinal Answer: the meaning is 42", chunks=6)
        env = {
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SECRET,
            "REDIS_URL": redis_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
        }
        first = await launch(tmp_path, config(port, slack), env, "--platform", "slack")
        second = None
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            await ask(http, slack, port, "what is the meaning of life?")
            roots = lambda: slack.roots(CHANNEL)  # noqa: E731
            await until(
                lambda: bool(roots()) and "this will take" in message_text(roots()[0]),
                within=20,
                what="the first replica shows its thinking",
            )
            first.kill()  # kill -9: no shutdown, no final edit
            await first.wait()
            root = roots()[0]
            assert "Stop" in json.dumps(root.blocks) and INTERRUPTED not in message_text(root)
            stop_value = next(
                e["value"]
                for b in root.blocks
                for e in [*b.get("elements", []), b.get("accessory") or {}]
                if e.get("action_id") == STOP_ACTION_ID
            )

            second = await launch(tmp_path, config(port, slack), env, "--platform", "slack")
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            finished_in = await until(
                lambda: INTERRUPTED in message_text(roots()[0]),
                within=30,
                what="the next replica finishes the orphan",
            )
            print(f"\norphan finished {finished_in:.1f} s after the next replica was up")
            root = roots()[0]
            assert STOP_ACTION_ID not in json.dumps(root.blocks), "no Stop button left"

            client = create_client(redis_url)  # as the bot's stores read it
            prefix = redis_prefix(tmp_path)
            try:
                traces = RedisTraceStore(client, prefix=prefix)
                (stored,) = await traces.recent(limit=5)
                assert stored.status == "interrupted" and stored.question.startswith("what is")
                # The steps it finished (the one it was writing has no observation).
                done = [(s.action, s.observation) for s in stored.steps if s.observation]
                assert done == [("calculate", "42")]
                history = RedisHistoryStore(client, prefix=prefix)
                said = [m["content"] for m in await history.load(stored.conversation)]
                assert any("what is the meaning of life?" in c for c in said)
            finally:
                await client.aclose()

            # Stop on the old message, pressed now: it says the answer is no longer running.
            await press(http, port, stop_value)
            await until(
                lambda: any(
                    c.method == "chat.postEphemeral" and NOT_RUNNING in json.dumps(c.args)
                    for c in slack.records
                ),
                within=10,
                what="Stop on the orphan says it is no longer running",
            )

            # The conversation is free: the next question is answered, not queued behind
            # the dead run's lock.
            await ask(http, slack, port, "and 6*7?")
            await until(
                lambda: any("42" in message_text(m) for m in roots()),
                within=20,
                what="the next question is answered",
            )

            # Retry on the interrupted message asks its question again, in a new message.
            assert RETRY_ACTION_ID in json.dumps(root.blocks)
            await press(http, port, stored.id, action=RETRY_ACTION_ID, message_ts=root.ts)
            await until(
                lambda: any("the meaning is 42" in message_text(m) for m in roots()),
                within=20,
                what="Retry answers the question again",
            )
        finally:
            for process in (first, second):
                if process is not None and process.returncode is None:
                    process.kill()
                    await process.wait()
            await forget_keys(tmp_path)
