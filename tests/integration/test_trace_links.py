"""Links to the trace page where people meet a trace: the last post of the Discord and Slack
trace threads and ``reactbot trace show``; each link, followed over real HTTP, opens the page."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
import io
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters.discord.client import create_bot
from adapters.discord.cog import Services
from adapters.discord.settings import DiscordSettings
from bot.cli import run_cli
from bot.web import LinkSigner, add_trace_pages
from core.agent import Agent
from core.history import InMemoryHistoryStore
from core.scripted import ScriptedModel
from core.stores import InMemoryLocks, InMemoryTraceStore, TraceStore
from core.stores.redis import RedisTraceStore
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import message_text
from tests.integration import test_slack_app
from tests.integration.test_discord import CALC_THEN_ANSWER, content_of, tools
from tests.integration.test_slack_app import CHANNEL, Harness, tool_then_answer
from tests.stores import in_memory_stores
from tests.surfaces.policy import policy

fake = test_slack_app.fake  # the Slack harness's fixtures, used here by name
make = test_slack_app.make

SECRET = "links-test-secret-0123456789abcdef"
LINK = re.compile(r"https?://127\.0\.0\.1:\d+/t/[0-9a-f]+\?exp=\d+&sig=[0-9a-f]{64}")


@contextlib.asynccontextmanager
async def pages(traces: TraceStore) -> AsyncIterator[LinkSigner]:
    """The trace pages on a real server; the signer's public_url points at it."""
    signer = LinkSigner(SECRET, public_url=None)
    app = web.Application()
    add_trace_pages(app, traces=traces, signer=signer)
    async with TestServer(app, host="127.0.0.1") as server:
        signer.public_url = str(server.make_url("")).rstrip("/")
        yield signer


async def opens_the_page(link: str, question: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(link) as response:
        assert response.status == 200
        page = await response.text()
    assert f'<span class="tag">Q</span> {question}' in page


async def test_the_last_post_of_a_discord_trace_thread_links_to_the_page() -> None:
    fake_discord = FakeDiscord()
    fake_discord.add_channel(CHANNEL_ID)
    await fake_discord.start()
    history, traces = InMemoryHistoryStore(), InMemoryTraceStore()
    agent = Agent(
        ScriptedModel(list(CALC_THEN_ANSWER)),
        tools(),
        history=history,
        traces=traces,
        locks=InMemoryLocks(),
    )
    async with pages(traces) as signer:
        settings = DiscordSettings(
            api_base_url=fake_discord.api_base_url,
            edit_interval=0.25,
            tick=0.25,
            guild_ready_timeout=0.05,
            layout="text",  # the components layout's link: test_discord_layout.py
        )
        services = Services(
            agent,
            in_memory_stores(history=history, traces=traces),
            settings,
            policy("discord", cooldown_seconds=0),
            trace_link=signer.link,
        )
        bot = create_bot(services)
        task = asyncio.create_task(bot.start("fake-token"))
        try:
            async with asyncio.timeout(10):
                await fake_discord.identified.wait()
                await bot.wait_until_ready()
            asked = fake_discord.message_create("what is 17*23+4?")
            await fake_discord.dispatch("MESSAGE_CREATE", asked)
            await fake_discord.wait_for_calls(
                lambda c: c.method == "POST" and "Full trace page" in content_of(c), 1, within=10
            )
            reply_id = next(
                mid for mid, m in fake_discord.messages.items() if "trace in thread" in m["content"]
            )
            posts = fake_discord.calls_to("POST", f"/channels/{reply_id}/messages")
            last = posts[-1].json["content"]
            assert last.startswith("**Totals** ✅ answered")
            (link,) = LINK.findall(last)
            assert f"<{link}>" in last  # shown whole, no embed, no masked text
            assert all("Full trace page" not in p.json["content"] for p in posts[:-1])
            await opens_the_page(link, "what is 17*23+4?")
        finally:
            await bot.close()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await fake_discord.stop()


async def test_the_last_post_of_a_slack_trace_thread_links_to_the_page(make: Any) -> None:
    h: Harness = await make(tool_then_answer())
    async with pages(h.bot.agent.traces) as signer:
        h.bot.trace_link = signer.link
        await h.ask("What is 17*23?")
        await h.settled()
        root = h.root()
        replies = h.fake.replies(CHANNEL, root.ts)
        last = replies[-1]
        assert "*Totals*" in message_text(last)
        assert last.blocks[-1]["type"] == "context"
        shown = last.blocks[-1]["elements"][0]["text"]
        (link,) = LINK.findall(shown)
        assert shown.endswith(f"<{link}>")  # no |label: nothing masked
        assert all("Full trace page" not in message_text(m) for m in replies[:-1])
        await opens_the_page(link, "What is 17*23?")


async def test_without_links_the_threads_carry_none(make: Any) -> None:
    h: Harness = await make(tool_then_answer())
    await h.ask("What is 17*23?")
    await h.settled()
    replies = h.fake.replies(CHANNEL, h.root().ts)
    assert replies and all("trace page" not in message_text(m) for m in replies)


async def cli(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(list(argv), env=env, stdout=out)
    return code, out.getvalue()


@pytest.mark.parametrize("secret", [True, False])
async def test_trace_show_prints_the_link_and_it_opens_the_page(
    tmp_path: Path, redis_url: str, redis_prefix: str, secret: bool
) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(redis_url)
    traces = RedisTraceStore(client, prefix=redis_prefix)
    try:
        async with pages(traces) as signer, FakeOpenAI(model="m") as model:
            config = tmp_path / "config.yaml"
            config.write_text(
                f"redis:\n  prefix: '{redis_prefix}'\n"
                f"web:\n  enabled: true\n  public_url: '{signer.public_url}'\n  link_ttl: 3600\n"
            )
            model.reply("Thought: easy\nAction: finish[Hello Ada.]")
            env = {"REDIS_URL": redis_url, "REACTBOT_MODEL": "m", "OPENAI_BASE_URL": model.base_url}
            if secret:
                env["REACTBOT_LINK_SECRET"] = SECRET
            args = ("--config", str(config))
            code, _ = await cli(*args, "ask", "--conversation", "c1", "Who <am> I?", env=env)
            assert code == 0
            code, listing = await cli(*args, "trace", "list", "--conversation", "c1", env=env)
            trace_id = listing.split()[0]
            code, shown = await cli(*args, "trace", "show", trace_id, env=env)
            assert code == 0
            if not secret:
                assert "No page link: REACTBOT_LINK_SECRET is not set." in shown
                assert not LINK.findall(shown)
                return
            (link,) = LINK.findall(shown)
            assert f"Page: {link}  (valid 1 hour)" in shown
            expires = int(link.split("exp=")[1].split("&")[0])
            assert 3500 <= expires - time.time() <= 3600  # web.link_ttl
            await opens_the_page(link, "Who &lt;am&gt; I?")
    finally:
        await client.aclose()
