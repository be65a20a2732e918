"""Two Discord bot processes (two clients on one fake gateway) sharing one Redis: a Stop
click that reaches the process not running the run still stops it, and one forged or
replayed there (another channel, a custom id naming the clicker) is refused; cooldowns are
shared."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from adapters import words
from adapters.discord.client import ReactBot, create_bot
from adapters.discord.cog import Services
from adapters.discord.settings import DiscordSettings
from core.agent import Agent
from core.history import InMemoryHistoryStore
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryTraceStore
from core.stores.redis import connect
from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord
from tests.integration.test_discord import CALC_THEN_ANSWER, content_of, tools
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

OTHER_CHANNEL = CHANNEL_ID + 1
STALLING = [Turn("Thought: let me think about this for a long time", chunk_size=5, stall_after=3)]


@dataclass
class Process:
    bot: ReactBot
    model: ScriptedModel
    traces: InMemoryTraceStore


@dataclass
class Replicas:
    fake: FakeDiscord
    processes: list[Process]

    async def send(self, to: int, event: str, data: dict[str, object]) -> None:
        """A gateway event for one process only (Discord routes each to one shard)."""
        await self.fake.dispatch_to(to, event, data)


@contextlib.asynccontextmanager
async def replicas(
    redis_url: str, redis_prefix: str, scripts: list[list[Turn | str]], **settings: object
) -> AsyncIterator[Replicas]:
    # Both processes identify at once; Discord's max_concurrency would space them 5 s apart,
    # which is not what these tests are about.
    fake = FakeDiscord(identify_interval=0.0)
    fake.add_channel(CHANNEL_ID)
    fake.add_channel(OTHER_CHANNEL)
    await fake.start()
    opened = [connect(redis_url, prefix=redis_prefix) for _ in scripts]
    processes: list[Process] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        for index, (script, stores) in enumerate(zip(scripts, opened, strict=True)):
            model, traces = ScriptedModel(list(script)), InMemoryTraceStore()
            history = InMemoryHistoryStore()
            agent = Agent(model, tools(), history=history, traces=traces, locks=InMemoryLocks())
            shared = in_memory_stores(
                history=history,
                traces=traces,
                cooldowns=stores.cooldowns,
                stops=stores.stops,
                runs=stores.runs,  # which runs are alive, as every replica sees it
            )
            own, rules = split("discord", **settings)
            services = Services(
                agent,
                shared,
                DiscordSettings(
                    api_base_url=fake.api_base_url,
                    edit_interval=0.25,
                    tick=0.25,
                    guild_ready_timeout=0.05,
                    layout="text",
                    **own,
                ),
                rules,
            )
            bot = create_bot(services)
            tasks.append(asyncio.create_task(bot.start("fake-token")))
            processes.append(Process(bot, model, traces))
            async with asyncio.timeout(10):
                while not (bot.is_ready() and len(fake.live_sessions) == index + 1):  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        yield Replicas(fake, processes)
    finally:
        for process in reversed(processes):  # each restores the endpoints it replaced
            await process.bot.close()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for stores in opened:
            await stores.aclose()
        await fake.stop()


async def test_a_stop_click_on_another_process_stops_the_run(
    redis_url: str, redis_prefix: str
) -> None:
    async with replicas(redis_url, redis_prefix, [STALLING, []], cooldown_seconds=0) as r:
        owner, other = r.processes
        await r.send(0, "MESSAGE_CREATE", r.fake.message_create("a long question"))
        reply = await r.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        custom_id = reply.json["components"][0]["components"][0]["custom_id"]
        reply_id = r.fake.created[0]
        stranger = r.fake.button_press(reply_id, custom_id, author_id=2002, user_name="mallory")
        await r.send(1, "INTERACTION_CREATE", stranger)
        refusal = await r.fake.wait_for_call(lambda c: "/callback" in c.path)
        assert refusal.json["data"]["flags"] == 64  # ephemeral, answered by the other process
        assert refusal.json["data"]["content"] == words.stop_refused("<@1001>")  # no ping
        await asyncio.sleep(0.2)
        assert owner.bot.cog is not None and owner.bot.cog.running, "still running"

        await r.send(1, "INTERACTION_CREATE", r.fake.button_press(reply_id, custom_id))
        async with asyncio.timeout(2):
            while owner.bot.cog.running:  # noqa: ASYNC110 - the owner's runs, emptied on stop
                await asyncio.sleep(0.005)
        # the loop's 2 s bound is the check: delivered (pub/sub, else a poll of at most
        # 0.25 s), not waited out; a tighter wall-clock bound only failed on loaded machines
        await r.fake.wait_for_call(lambda c: content_of(c).startswith("**Totals**"))
        final = [c for c in r.fake.calls_to("PATCH", f"/messages/{reply_id}") if c.status == 200]
        assert final[-1].json["content"].startswith("⏹️ Stopped by ada after step 1.")
        trace = await owner.traces.last(f"discord:{CHANNEL_ID}")
        assert trace is not None and trace.stopped_by == "ada"
        assert trace.stopped_by_id == "1001"  # carried across processes with the name
        assert other.model.calls == []


async def test_a_forged_or_replayed_stop_on_another_process_is_refused(
    redis_url: str, redis_prefix: str
) -> None:
    async with replicas(redis_url, redis_prefix, [STALLING, []], cooldown_seconds=0) as r:
        owner, _ = r.processes
        await r.send(0, "MESSAGE_CREATE", r.fake.message_create("a long question"))
        reply = await r.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        custom_id = reply.json["components"][0]["components"][0]["custom_id"]
        run_id = custom_id.split(":")[2]
        reply_id = r.fake.created[0]
        attempts = [  # (custom id, who, channel): none of them the asker where the run is
            (f"reactbot:stop:{run_id}:2002", 2002, CHANNEL_ID),  # forged: naming the clicker
            (f"reactbot:stop:{run_id}:2002", 2002, OTHER_CHANNEL),
            (custom_id, 2002, OTHER_CHANNEL),  # replayed from another channel
            (custom_id, 1001, OTHER_CHANNEL),  # the asker, but not where the run is
        ]
        for sent, who, channel in attempts:
            press = r.fake.button_press(
                reply_id, custom_id, author_id=who, user_name="mallory", channel_id=channel
            )
            # discord.py answers only a custom id the pressed message carries: a forged one
            # comes with a forged copy of the message
            press = json.loads(json.dumps(press).replace(custom_id, sent))
            await r.send(1, "INTERACTION_CREATE", press)

        def answers() -> list[dict[str, Any]]:
            return [c.json for c in r.fake.calls if "/callback" in c.path]

        async with asyncio.timeout(5):
            while len(answers()) < len(attempts):  # noqa: ASYNC110 - the fake's record
                await asyncio.sleep(0.01)
        said = [words.stop_refused("<@1001>")] * 3 + [words.NOT_ITS_PLACE]  # the asker's: elsewhere
        shown = [a.get("data", {}) for a in answers()]  # a defer (no data) would be a stop
        assert all(d.get("flags") == 64 for d in shown), shown
        assert sorted(d.get("content", "") for d in shown) == sorted(said), shown
        assert owner.bot.cog is not None and owner.bot.cog.running, "the run goes on"

        await r.send(1, "INTERACTION_CREATE", r.fake.button_press(reply_id, custom_id))
        async with asyncio.timeout(2):
            while owner.bot.cog.running:  # noqa: ASYNC110 - the owner's runs, emptied on stop
                await asyncio.sleep(0.005)
        await r.fake.wait_for_call(lambda c: content_of(c).startswith("**Totals**"))


async def test_processes_share_one_cooldown(redis_url: str, redis_prefix: str) -> None:
    async with replicas(redis_url, redis_prefix, [CALC_THEN_ANSWER, []], cooldown_seconds=60) as r:
        await r.send(0, "MESSAGE_CREATE", r.fake.message_create("first"))
        await r.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        await r.send(1, "MESSAGE_CREATE", r.fake.message_create("second, on another shard"))
        note = await r.fake.wait_for_call(lambda c: "One moment" in content_of(c))
        assert "you can ask again in 60 s" in note.json["content"]
        await r.fake.wait_for_call(lambda c: content_of(c).startswith("**Totals**"))
        assert r.processes[1].model.calls == []
