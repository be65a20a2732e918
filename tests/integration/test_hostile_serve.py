"""What the internet sends, end to end through ``reactbot serve`` in its own process.

The bot runs as users run it (``python -m bot serve``), against local fakes that refuse what
the real services refuse: the OpenAI-compatible model, Tavily, and Discord or Slack. A web
page returns a 1,900-character URL, two 600-character ones, a masked phishing link, mention
markup and an unclosed code block; the model repeats all of it in a 6,000-character answer.
Each test then reads what the platform fake accepted (and refused).

A separate process matters: the defect this guards against (a zero width in the Discord
renderer) spun the event loop forever, which no timeout inside the same loop can catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio
from slack_sdk.signature import SignatureVerifier

from tests.fakes.discord_limits import IS_COMPONENTS_V2, components_text
from tests.fakes.discord_server import (
    CHANNEL_ID,
    DM_CHANNEL_BASE,
    GUILD_ID,
    SUPPRESS_EMBEDS,
    Call,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import BOT_USER_ID, TEAM_ID, FakeSlack, message_text
from tests.fakes.tavily_server import FakeTavily, Reply
from tests.integration.test_serve import free_port, wait_for_http
from tests.integration.test_slack_app import eventually

LONG_URL = "https://example.com/" + "a" * 1900
MID_URLS = [f"https://example.org/{'b' * 600}?{i}" for i in range(2)]
PHISHING = "[Verify your account](https://evil.example/login)"
PINGS = "@everyone @here <@123456789012345678> <@&123456789012345678> <!channel> <@U0123ABCD>"
PAGE = f"{PINGS} {PHISHING}\n```python\nprint('this block is never closed')"

ANSWER = (
    f"See {LONG_URL} and {MID_URLS[0]}.\n```python\nprint('unbalanced')\n"
    + f"A paragraph that repeats the page: {PINGS} {PHISHING}.\n" * 40
)
STEPS = [
    "Thought: I will search the web.\nAction: search[what the page says]",
    f"Thought: The page says {PHISHING} and {PINGS}.\nAction: finish[{ANSWER}]",
]

_DISCORD_PING = re.compile(r"@(everyone|here)|<@[!&]?\d")
_EVIL_LINK = re.compile(r"\]\(\s*<?https://evil")


def search_results() -> Reply:
    urls = [LONG_URL, *MID_URLS]
    return Reply.ok(
        [
            {"title": f"{PHISHING} @everyone", "url": url, "content": PAGE, "score": 0.9}
            for url in urls
        ]
    )


async def launch(
    tmp_path: Path,
    config: str,
    env: dict[str, str],
    *args: str,
    home: Path | None = None,
    ops_port: int | None = None,
) -> asyncio.subprocess.Process:
    """``python -m bot --config FILE serve ARGS`` with only ``env``'s secrets; its output goes
    to ``serve.log`` beside the config, both in ``home`` (default ``tmp_path``: processes that
    run at once each need their own). The Redis prefix is ``tmp_path``'s, shared by them. The
    ops endpoint is off unless ``ops_port`` is given (``/readyz``: the platforms connected)."""
    home = home or tmp_path
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    # Its own keys on the shared Redis: the fakes' ids repeat from run to run, and a claim an
    # earlier run left would make this process skip the event as handled elsewhere.
    path.write_text(
        config
        + f"redis:\n  prefix: '{redis_prefix(tmp_path)}'\n"
        + ("ops:\n  enabled: false\n" if ops_port is None else f"ops:\n  port: {ops_port}\n")
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REACTBOT_"))}
    for name in ("DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "TAVILY_API_KEY"):
        clean.pop(name, None)
    with (home / "serve.log").open("wb") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "--config",
            str(path),
            "serve",
            *args,
            env={**clean, **env},
            stdout=log,
            stderr=log,
        )


def redis_prefix(tmp_path: Path) -> str:
    return f"reactbot-test-{uuid.uuid5(uuid.NAMESPACE_URL, str(tmp_path)).hex[:12]}:"


async def forget_keys(tmp_path: Path) -> None:
    """Delete the keys the process wrote (only those: the server is shared)."""
    url = os.environ.get("REDIS_URL")
    if not url:
        return
    client = redis.asyncio.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=redis_prefix(tmp_path) + "*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, config: str, env: dict[str, str], platform: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``reactbot serve --platform X`` running; SIGTERM at the end, which must exit 0."""
    process = await launch(tmp_path, config, env, "--platform", platform)
    try:
        yield process
        assert process.returncode is None, "reactbot serve died:\n" + _tail(tmp_path)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await process.wait() == 0, _tail(tmp_path)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await forget_keys(tmp_path)


def _tail(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text(errors="replace")[-4000:]


def sent_text(call: Call) -> str:
    """A message's content, or the text of its Text Displays (the components layout)."""
    body = call.json if isinstance(call.json, dict) else {}
    return str(body.get("content") or "") or "\n".join(
        components_text(body.get("components") or [])
    )


# ---- Discord --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["components", "text"])
async def test_discord_serves_a_hostile_page_and_answer_within_every_limit(
    tmp_path: Path, layout: str
) -> None:
    async with FakeOpenAI() as model, FakeTavily(api_key="tvly-test") as tavily:
        model.reply(STEPS[0]).reply(STEPS[1])
        tavily.enqueue(search_results())
        fake = FakeDiscord(token="serve-token")
        fake.add_channel(CHANNEL_ID)
        await fake.start()
        config = (
            f"discord:\n  api_base_url: {fake.api_base_url}\n  cooldown_seconds: 0\n"
            f"  edit_interval: 0.25\n  allowed_guilds: [{GUILD_ID}]\n  layout: {layout}\n"
            f"tools:\n  search:\n    api_base_url: {tavily.base_url}\n"
            "model:\n  max_retries: 0\n"
        )
        env = {
            "DISCORD_TOKEN": "serve-token",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": model.base_url,
            "REACTBOT_MODEL": "fake-model",
            "TAVILY_API_KEY": "tvly-test",
        }
        try:
            async with serving(tmp_path, config, env, "discord"):
                async with asyncio.timeout(30):
                    await fake.identified.wait()
                await asyncio.sleep(0.5)  # the bot is ready once its guild arrived
                await fake.dispatch("MESSAGE_CREATE", fake.message_create("what does it say?"))
                totals = await fake.wait_for_call(
                    lambda c: sent_text(c).startswith("**Totals**"), within=60
                )
                # a stranger's DM and an overlong question: refused, no model call
                dm = fake.message_create("hi", dm=True, author_id=4242)
                await fake.dispatch("MESSAGE_CREATE", dm)
                await fake.dispatch("MESSAGE_CREATE", fake.message_create("why " * 1500))
                await fake.wait_for_call(lambda c: "characters long" in sent_text(c), within=20)
                await fake.wait_for_call(
                    lambda c: c.path == f"/channels/{DM_CHANNEL_BASE + 4242}/messages", within=20
                )
        finally:
            await fake.stop()
        model.assert_complete()

    refused = [c for c in fake.calls if c.status >= 400 and "/guilds/" not in c.path]
    assert refused == [], refused
    for call in fake.calls:
        text = sent_text(call)
        assert not _DISCORD_PING.search(text), (call.path, text[:300])
        assert not _EVIL_LINK.search(text), (call.path, text[:300])
        assert len(text) <= (2000 if layout == "text" else 4000 + 100)  # + the joins
        assert text.count("```") % 2 == 0
    answer_edits = [c for c in fake.calls if c.method == "PATCH" and "See https" in sent_text(c)]
    final = sent_text(answer_edits[-1])
    assert "the answer goes on in the thread" in final
    if layout == "text":
        assert "Sources: example.com (link too long to show; it is in the trace)" in final
    else:  # hosts only, and the Sources button beside them lists the links
        assert "-# Sources: example.com · example.org" in final
        assert "reactbot:sources:" in json.dumps(answer_edits[-1].json)
        assert "content" not in answer_edits[-1].json
    thread_id = totals.path.split("/")[2]
    assert fake.channels[int(thread_id)]["type"] == 11
    for mid in fake.created:
        message = fake.messages[mid]
        text = message["content"] or "\n".join(components_text(message["components"]))
        if "http" in text:
            assert message["flags"] & SUPPRESS_EMBEDS, text[:100]
        if layout == "components" and message["components"]:
            assert message["flags"] & IS_COMPONENTS_V2 and not message["content"]
    assert all(r["max_tokens"] == 2048 for r in model.requests)


async def test_discord_serve_reports_a_wrong_token_in_one_line(tmp_path: Path) -> None:
    fake = FakeDiscord(token="the-real-token")
    await fake.start()
    try:
        config = f"discord:\n  api_base_url: {fake.api_base_url}\n"
        env = {"DISCORD_TOKEN": "a-wrong-token-never-printed"}
        process = await launch(tmp_path, config, env)
        async with asyncio.timeout(30):
            await process.wait()
    finally:
        await fake.stop()
    text = _tail(tmp_path)
    assert process.returncode == 1
    assert "discord: stopped: LoginFailure: Improper token has been passed." in text
    assert "a-wrong-token-never-printed" not in text
    assert "Traceback" not in text


# ---- Slack ----------------------------------------------------------------------------------

SIGNING_SECRET = "serve-signing-secret"
SLACK_PINGS = ("<!channel>", "<!here>", "<!everyone>", "<@U0123ABCD>", "<https://evil")


async def slack_post(
    url: str, fields: dict[str, str] | None = None, event: dict[str, object] | None = None
) -> dict[str, object]:
    """A request signed as Slack signs it: a slash command (form fields) or an event (JSON)."""
    if event is not None:
        body = json.dumps(
            {
                "type": "event_callback",
                "team_id": TEAM_ID,
                "event_id": f"Ev{time.time_ns()}",
                "event": {"team": TEAM_ID, **event},
                "api_app_id": "A1",
                "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
            }
        )
        kind = "application/json"
    else:
        body, kind = urllib.parse.urlencode(fields or {}), "application/x-www-form-urlencoded"
    stamp = str(int(time.time()))
    signature = SignatureVerifier(SIGNING_SECRET).generate_signature(timestamp=stamp, body=body)
    headers = {
        "Content-Type": kind,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature or "",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body.encode(), headers=headers) as response,
    ):
        text = await response.text()
        assert response.status == 200, text
    return json.loads(text) if text.startswith("{") else {}


def ask_form(fake: FakeSlack, text: str, n: int) -> dict[str, str]:
    return {
        "command": "/ask",
        "text": text,
        "user_id": "U1ADA",
        "user_name": "ada",
        "channel_id": "C1GENERAL",
        "team_id": TEAM_ID,
        "trigger_id": f"trigger-{n}",
        "response_url": fake.response_url(f"cmd{n}"),
    }


async def test_slack_serves_a_hostile_page_and_answer_within_every_limit(tmp_path: Path) -> None:
    port = free_port()
    async with (
        FakeOpenAI() as model,
        FakeTavily(api_key="tvly-test") as tavily,
        FakeSlack(token="xoxb-serve") as fake,
    ):
        model.reply(STEPS[0]).reply(STEPS[1])
        tavily.enqueue(search_results())
        fake.channel_members["C1GENERAL"] = ["U1ADA"]
        # Slack refuses the full final message once: the compact form must follow.
        fake.fail(
            "chat.update",
            "msg_blocks_too_long",
            when=lambda args: "trace in thread" in json.dumps(args.get("blocks", "")),
        )
        config = (
            f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {fake.base_url}\n"
            "  update_interval: 0.25\n  cooldown_seconds: 0\n  allowed_channels: [C1GENERAL]\n"
            f"tools:\n  search:\n    api_base_url: {tavily.base_url}\n"
            "model:\n  max_retries: 0\n"
        )
        env = {
            "SLACK_BOT_TOKEN": "xoxb-serve",
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": model.base_url,
            "REACTBOT_MODEL": "fake-model",
            "TAVILY_API_KEY": "tvly-test",
        }
        url = f"http://127.0.0.1:{port}/slack/events"
        async with serving(tmp_path, config, env, "slack"):
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            acked = await slack_post(url, ask_form(fake, "what does the page say?", 1))
            assert "Working on it" in str(acked.get("text"))
            await eventually(lambda: bool(fake.uploads), within=60)
            refused = await slack_post(url, ask_form(fake, "why " * 1500, 2))
            assert "characters long; the limit is 4,000" in str(refused.get("text"))
            dm = {
                "type": "message",
                "channel_type": "im",
                "channel": "D0X",
                "ts": "1.1",
                "user": "U9STRANGER",
                "text": "hi",
            }
            await slack_post(url, event=dm)
            await eventually(lambda: bool(fake.calls("chat.postEphemeral")), within=20)
        model.assert_complete()

    failed = [(c.method, c.error) for c in fake.records if c.error is not None]
    assert failed == [("chat.update", "msg_blocks_too_long")], failed
    for call in fake.records:
        dumped = json.dumps(call.args)
        for ping in SLACK_PINGS:
            assert ping not in dumped, (call.method, ping)
    (root,) = fake.roots("C1GENERAL")
    shown = message_text(root)
    assert shown.count("```") % 2 == 0
    assert "reactbot_stop" not in json.dumps(root.blocks), "never left looking alive"
    assert "See https://example.com/" in shown and "trace in thread" in shown
    thread = [message_text(m) for m in fake.replies("C1GENERAL", root.ts)]
    assert any(t.startswith("Answer") or "*Answer*" in t for t in thread)
    assert any("*Totals*" in t for t in thread)
    assert (
        "I answer direct messages only for members of <#C1GENERAL>"
        in (fake.calls("chat.postEphemeral")[0].args["text"])
    )
    assert all(r["max_tokens"] == 2048 for r in model.requests)
