"""The PDF bomb of issue 26 on a real reply path: ``reactbot serve --platform slack`` in its
own process, Slack's strict fake serving the file to the bot token, the OpenAI fake.

- A mention with the bomb attached: the live message, with Stop, is visible while the file
  is read; the reply says "bomb.pdf: took too long to read, skipped"; the question is still
  answered; and another conversation's tool call meanwhile is not slowed past a bound.
- SIGTERM while a bomb is being read: the process exits within 10 s, its file worker with
  it, and the live message is left final.
- Stop pressed while the bomb is read (its live message says the files are being read):
  the reading ends at once, its worker killed, and the message is final, stopped.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.parse
import uuid
from pathlib import Path

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from adapters.slack.blocks import STOP_ACTION_ID
from adapters.words import READING_FILES
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import TEAM_ID, FakeSlack, Message, message_text
from tests.hostile import pdf_bomb
from tests.integration.test_chaos import SECRET, mention, slack_event, step, until
from tests.integration.test_hostile_serve import forget_keys, launch
from tests.integration.test_serve import free_port, wait_for_http

pytestmark = pytest.mark.slow

BOMB_CHANNEL, OTHER_CHANNEL = "C1BOMB", "C2OTHER"
TOOL_BOUND = 2.0
"""Seconds another conversation's tool step may take (model reply, tool, next request)
while the bomb is read: without workers, the default thread pool made it wait for the
bomb (20 s in the issue)."""


def config(port: int, slack: FakeSlack, *, parse_seconds: float) -> str:
    return (
        f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {slack.base_url}\n"
        "  update_interval: 0.3\n  cooldown_seconds: 0\n"
        "model:\n  name: m\n  max_retries: 0\nagent:\n  mode: text\n"
        f"files:\n  parse_seconds: {parse_seconds}\n"
    )


def env(slack: FakeSlack, model: FakeOpenAI, redis_url: str) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_SIGNING_SECRET": SECRET,
        "REDIS_URL": redis_url,
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "sk-test",
    }


def bomb_mention(slack: FakeSlack, ts: str, text: str, pages: int) -> dict[str, object]:
    event = mention(BOMB_CHANNEL, "U1ADA", ts, text)
    event["files"] = [slack.add_file("bomb.pdf", pdf_bomb(pages=pages), mimetype="application/pdf")]
    return event


def root_of(slack: FakeSlack, channel: str) -> Message | None:
    roots = slack.roots(channel)
    return roots[0] if roots else None


def shows_stop(message: Message | None) -> bool:
    return message is not None and STOP_ACTION_ID in json.dumps(message.blocks)


def workers_of(pid: int) -> list[int]:
    """The bot's file workers (``python -m core.file_workers``), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"core.file_workers" in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_pdf_bomb_on_the_reply_path_is_skipped_while_others_go_on(
    tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    async with (
        FakeSlack(token="xoxb-bomb") as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        model.reply(
            "Thought: the file was not read.\nFinal Answer: 36 months", when=step("warranty", 0)
        )
        model.reply("Thought: multiply.\nAction: calculate[6*7]", when=step("product", 0))
        model.reply("Thought: done.\nFinal Answer: it is 42", when=step("product", 1))
        process = await launch(
            tmp_path, config(port, slack, parse_seconds=5), env(slack, model, redis_url),
            "--platform", "slack",
        )  # fmt: skip
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            event = bomb_mention(slack, "1800000000.000100", "how long is the warranty?", 10)
            sent = time.monotonic()
            await slack_event(http, port, "EvBomb", event)
            await until(lambda: bool(slack.file_requests), within=20, what="the bomb downloaded")
            await until(
                lambda: bool(workers_of(process.pid)), within=10, what="a worker reads the bomb"
            )
            # While it is read: the live message is there, with Stop, saying so; no model call.
            await until(
                lambda: (
                    shows_stop(root_of(slack, BOMB_CHANNEL))
                    and READING_FILES.lower()
                    in message_text(root_of(slack, BOMB_CHANNEL) or _EMPTY).lower()
                ),
                within=3,
                what="the live message with Stop while the file is read",
            )
            assert not model.requests, "the question waits for its file"

            # Another conversation meanwhile: its tool step is not slowed by the bomb.
            other = mention(OTHER_CHANNEL, "U2BOB", "1800000000.000200", "the product of 6 and 7?")
            await slack_event(http, port, "EvOther", other)
            await until(
                lambda: "it is 42" in message_text(root_of(slack, OTHER_CHANNEL) or _EMPTY),
                within=15,
                what="the other conversation answered",
            )
            notes = lambda: [  # noqa: E731
                message_text(m) for m in slack.messages.values() if "bomb.pdf" in message_text(m)
            ]
            assert not notes(), "the other conversation finished while the bomb was being read"
            times = [
                at
                for body, at in zip(model.requests, model.request_times, strict=True)
                if "product" in json.dumps(body)
            ]
            tool_step = times[1] - times[0]
            print(f"\nanother conversation's tool step while the bomb was read: {tool_step:.2f} s")
            assert tool_step < TOOL_BOUND

            # The bomb: one line in the reply, and the question answered all the same.
            await until(lambda: bool(notes()), within=30, what="the bomb refused")
            refused_after = time.monotonic() - sent
            assert notes() == ["⚠️ bomb.pdf: took too long to read, skipped."]
            await until(
                lambda: (
                    "36 months" in message_text(root_of(slack, BOMB_CHANNEL) or _EMPTY)
                    and not shows_stop(root_of(slack, BOMB_CHANNEL))
                ),
                within=15,
                what="the question answered",
            )
            print(f"the bomb refused {refused_after:.1f} s after the mention (parse_seconds 5)")
            assert not shows_stop(root_of(slack, BOMB_CHANNEL))
            model.assert_complete()
            assert process.returncode is None
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await forget_keys(tmp_path)


async def test_sigterm_while_a_file_is_read_exits_at_once_and_leaves_the_message_final(
    tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    async with (
        FakeSlack(token="xoxb-bomb") as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        process = await launch(
            tmp_path, config(port, slack, parse_seconds=60), env(slack, model, redis_url),
            "--platform", "slack",
        )  # fmt: skip
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            event = bomb_mention(slack, "1800000000.000300", "read this", 50)  # minutes of CPU
            await slack_event(http, port, "EvTerm", event)
            await until(
                lambda: bool(workers_of(process.pid)), within=20, what="a worker reads the bomb"
            )
            await asyncio.sleep(0.5)
            workers = workers_of(process.pid)
            stopped = time.monotonic()
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(10):
                code = await process.wait()
            exited = time.monotonic() - stopped
            print(f"\nexited {exited:.1f} s after SIGTERM, a file being read")
            assert code == 0
            await until(
                lambda: not any(Path(f"/proc/{w}").exists() for w in workers),
                within=2,
                what="the file worker ends with the bot",
            )
            root = root_of(slack, BOMB_CHANNEL)
            assert root is not None, "the live message was posted"
            assert not shows_stop(root), f"left live: {message_text(root)}"
            assert "reactbot was restarting. Ask again in a moment." in message_text(root)
            assert not model.requests  # the question never reached the model
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await forget_keys(tmp_path)


async def test_stop_while_a_file_is_read_ends_the_reading_at_once(
    tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    async with (
        FakeSlack(token="xoxb-bomb") as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        process = await launch(
            tmp_path, config(port, slack, parse_seconds=60), env(slack, model, redis_url),
            "--platform", "slack",
        )  # fmt: skip
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            event = bomb_mention(slack, "1800000000.000400", "read this", 50)  # minutes of CPU
            await slack_event(http, port, "EvStop", event)
            await until(
                lambda: bool(workers_of(process.pid)), within=20, what="a worker reads the bomb"
            )
            (worker,) = workers_of(process.pid)
            root = root_of(slack, BOMB_CHANNEL)
            assert root is not None and shows_stop(root)
            assert READING_FILES.lower() in message_text(root).lower()
            await press_stop(http, port, root)
            await until(
                lambda: not Path(f"/proc/{worker}").exists(),
                within=5,
                what="the worker killed by the Stop",
            )
            await until(
                lambda: not shows_stop(root_of(slack, BOMB_CHANNEL)),
                within=10,
                what="the message final",
            )
            assert "stopped" in message_text(root_of(slack, BOMB_CHANNEL) or _EMPTY).lower()
            assert not model.requests, "the question never reached the model"
            assert process.returncode is None
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await forget_keys(tmp_path)


async def press_stop(http: aiohttp.ClientSession, port: int, message: Message) -> None:
    """The asker presses the message's Stop button, as Slack signs it."""
    (value,) = [
        element["value"]
        for block in message.blocks
        for element in [*block.get("elements", ()), block.get("accessory")]
        if isinstance(element, dict) and element.get("action_id") == STOP_ACTION_ID
    ]
    payload = {
        "type": "block_actions",
        "user": {"id": "U1ADA"},
        "team": {"id": TEAM_ID},
        "channel": {"id": message.channel},
        "trigger_id": f"press.{uuid.uuid4().hex}",  # Slack mints one per press
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": message.channel, "message_ts": message.ts},
        "actions": [
            {"type": "button", "action_id": STOP_ACTION_ID, "block_id": "b", "value": value}
        ],
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


_EMPTY = Message("", "", "", [], None)
