"""Two web chat replicas sharing one real Redis and one session key (``REACTBOT_LINK_SECRET``):
a Stop of another session's run, at the replica that does not run it, is refused and the run
goes on; the asker's own Stop there stops it. The session is the person and the place: the
run's own record says which session asked, wherever the run lives."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from adapters import words
from adapters.channels import ChannelChoices
from adapters.web.chat import WebChat, WebSettings
from core.agent import Agent, AgentSettings
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.scripted import ScriptedModel, Turn
from core.stores.redis import RedisStores
from core.tools import ToolRegistry
from tests.integration.test_web_chat import Events, _csrf
from tests.stores import in_memory_stores
from tests.surfaces.policy import policy

SLOW = [Turn("Thought: this will take a long while", chunk_size=4, stall_after=4)]


@dataclass
class Replica:
    chat: WebChat
    url: str
    model: ScriptedModel


@dataclass
class Visitor:
    """One browser: its cookie (good at every replica: one key) and its CSRF token."""

    http: aiohttp.ClientSession
    csrf: str

    async def post(self, at: Replica, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        headers = {"X-CSRF-Token": self.csrf, "Origin": at.url}
        async with self.http.post(at.url + path, json=body, headers=headers) as response:
            return response.status, await response.json()


@pytest.fixture
async def replicas(
    two_processes: list[RedisStores],
) -> AsyncIterator[Callable[[list[list[Turn]]], Any]]:
    key = secrets.token_hex(32).encode()
    servers: list[TestServer] = []

    async def build(scripts: list[list[Turn]]) -> list[Replica]:
        made = []
        for script, shared in zip(scripts, two_processes, strict=True):
            stores = in_memory_stores(stops=shared.stops, runs=shared.runs)
            model, tools = ScriptedModel(script), ToolRegistry()
            agent = Agent(
                model, tools, stores=stores, settings=AgentSettings(model_timeout=5, deadline=20)
            )
            chat = WebChat(
                agent,
                stores=stores,
                budgets=TokenBudgets(InMemoryUsageCounters()),
                choices=ChannelChoices(
                    stores.channel_settings, {}, tools, default_model=model.name
                ),
                settings=WebSettings(),
                policy=policy("web", cooldown_seconds=0.0),
                secret=key,
            )
            server = TestServer(chat.application(), host="127.0.0.1")
            await server.start_server()
            servers.append(server)
            made.append(Replica(chat, f"http://127.0.0.1:{server.port}", model))
        return made

    yield build
    for server in servers:  # its shutdown closes the chat (streams ended, runs stopped)
        await server.close()


@pytest.fixture
async def visitors() -> AsyncIterator[Callable[[Replica], Any]]:
    opened: list[aiohttp.ClientSession] = []

    async def visit(replica: Replica) -> Visitor:
        http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        opened.append(http)
        async with http.get(replica.url + "/") as page:
            return Visitor(http, _csrf(await page.text()))

    yield visit
    for http in opened:
        await http.close()


async def test_another_sessions_stop_at_another_replica_is_refused(
    replicas: Any, visitors: Any
) -> None:
    runs, other = await replicas([SLOW, []])
    ada: Visitor = await visitors(runs)
    events = Events(await ada.http.get(runs.url + "/api/events"))
    assert (await ada.post(runs, "/api/ask", {"question": "a slow one"}))[0] == 202
    live = await events.until(lambda d: d.get("phase") == "thinking" and d.get("steps"))

    mallory: Visitor = await visitors(other)  # another session, at the other replica
    for _ in range(2):  # pressed, and the same request replayed
        status, body = await mallory.post(other, "/api/stop", {"run": live["run"]})
        assert (status, body) == (403, {"error": words.stop_refused(), "reason": "who"})
    assert runs.chat.answering.running == (live["run"],), "the run goes on"

    assert await ada.post(other, "/api/stop", {"run": live["run"]}) == (200, {"ok": True})
    final = await events.until(lambda d: d.get("final") is True)
    assert final["phase"] == "cancelled" and final["outcome"].startswith("⏹️ Stopped by you")
    events.response.close()
    assert other.model.calls == []
