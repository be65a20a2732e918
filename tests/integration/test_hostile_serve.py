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
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from tests.fakes.discord_server import (
    CHANNEL_ID,
    DM_CHANNEL_BASE,
    GUILD_ID,
    SUPPRESS_EMBEDS,
    Call,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.tavily_server import FakeTavily, Reply

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


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, config: str, env: dict[str, str], platform: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m bot serve --platform X`` with ``config``; SIGTERM at the end (exit 0)."""
    path = tmp_path / "config.yaml"
    path.write_text(config)
    log: IO[bytes] = (tmp_path / "serve.log").open("wb")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REACTBOT_"))}
    for name in ("DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "TAVILY_API_KEY"):
        clean.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "--config",
        str(path),
        "serve",
        "--platform",
        platform,
        env={**clean, **env},
        stdout=log,
        stderr=log,
    )
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
        log.close()


def _tail(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text(errors="replace")[-4000:]


def sent_text(call: Call) -> str:
    body = call.json if isinstance(call.json, dict) else {}
    return str(body.get("content") or "")


# ---- Discord --------------------------------------------------------------------------------


async def test_discord_serves_a_hostile_page_and_answer_within_every_limit(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI() as model, FakeTavily(api_key="tvly-test") as tavily:
        model.reply(STEPS[0]).reply(STEPS[1])
        tavily.enqueue(search_results())
        fake = FakeDiscord(token="serve-token")
        fake.add_channel(CHANNEL_ID)
        await fake.start()
        config = (
            f"discord:\n  api_base_url: {fake.api_base_url}\n  cooldown_seconds: 0\n"
            f"  edit_interval: 0.25\n  allowed_guilds: [{GUILD_ID}]\n"
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
        assert len(text) <= 2000
        assert text.count("```") % 2 == 0
    answer_edits = [c for c in fake.calls if c.method == "PATCH" and "See https" in sent_text(c)]
    final = sent_text(answer_edits[-1])
    assert "the answer goes on in the thread" in final
    assert "Sources: example.com (link too long to show; it is in the trace)" in final
    thread_id = totals.path.split("/")[2]
    assert fake.channels[int(thread_id)]["type"] == 11
    for mid in fake.created:
        message = fake.messages[mid]
        if "http" in message["content"]:
            assert message["flags"] & SUPPRESS_EMBEDS, message["content"][:100]
    assert all(r["max_tokens"] == 2048 for r in model.requests)


async def test_discord_serve_reports_a_wrong_token_in_one_line(tmp_path: Path) -> None:
    fake = FakeDiscord(token="the-real-token")
    await fake.start()
    try:
        config = f"discord:\n  api_base_url: {fake.api_base_url}\n"
        path = tmp_path / "c.yaml"
        path.write_text(config)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "--config",
            str(path),
            "serve",
            env={**os.environ, "DISCORD_TOKEN": "a-wrong-token-never-printed"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(30):
            out, err = await process.communicate()
    finally:
        await fake.stop()
    text = (out + err).decode()
    assert process.returncode == 1
    assert "discord: stopped: LoginFailure: Improper token has been passed." in text
    assert "a-wrong-token-never-printed" not in text
    assert "Traceback" not in text
