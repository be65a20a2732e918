"""Scale-out on Discord: two processes on one Redis, each running one of two shards
(``discord.shard_count: 2``, ``discord.shard_ids: [0]`` / ``[1]``), wired as ``reactbot
serve`` wires them. The fake gateway routes each guild's events to the shard that owns it, as
Discord does, so every question is answered once, by its guild's process."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # discord.py imports the deprecated audioop module
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.app import App
from bot.config import Config, ConfigError, Secrets, load_config
from bot.serve_discord import serve_discord
from tests.fakes.discord_server import GUILD_ID, FakeDiscord

OTHER_GUILD = GUILD_ID + (1 << 22)
"""A guild on the other shard: ``(id >> 22) % 2`` is 1 for ``GUILD_ID`` and 0 for this one."""
CHANNEL_A, CHANNEL_B = 900000000000000101, 900000000000000202


def shard_of(guild: int) -> int:
    return (guild >> 22) % 2


class Conversations:
    """A run observer: the conversation of every run this process started."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def start(self, trace: Any) -> Any:
        self.seen.append(trace.conversation)
        return self

    def model_call(self, step: int, model: str, request: object) -> Any:
        return self

    def tool_call(self, step: int, call_id: str | None, *args: str) -> Any:
        return self

    def response(self, id: str, model: str) -> None:
        pass

    def first_chunk(self) -> None:
        pass

    def chunk(self, usage: object, finish: str | None) -> None:
        pass

    def end(self, *_: object) -> None:
        pass


@contextlib.asynccontextmanager
async def two_shards(
    redis_url: str, prefix: str
) -> AsyncIterator[tuple[FakeDiscord, list[Conversations]]]:
    fake = FakeDiscord(identify_interval=0.0, guilds=(GUILD_ID, OTHER_GUILD), recommended_shards=2)
    fake.add_channel(CHANNEL_A)
    fake.add_channel(CHANNEL_B, guild=OTHER_GUILD)
    await fake.start()
    apps: list[App] = []
    ran: list[Conversations] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        for shard in (0, 1):
            settings = {
                "redis": {"url": redis_url, "prefix": prefix},
                "ops": {"enabled": False},
                "discord": {
                    "api_base_url": fake.api_base_url,
                    "cooldown_seconds": 0,
                    "layout": "text",
                    "shard_count": 2,
                    "shard_ids": [shard],
                },
            }
            env = Secrets.from_env({"DISCORD_TOKEN": fake.token})
            app = App.create(Config.model_validate({**settings, "secrets": env}))
            apps.append(app)
            ran.append(Conversations())
            app.agent.observers.append(ran[-1])
            tasks.append(asyncio.create_task(serve_discord(app)))
            async with asyncio.timeout(10):
                while len(fake.live_sessions) < shard + 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        async with asyncio.timeout(10):
            while not all("discord" in a.platforms for a in apps) or not all(  # noqa: ASYNC110
                [await a.platforms["discord"].connected() for a in apps]
            ):
                await asyncio.sleep(0.02)
        yield fake, ran
    finally:
        for task in reversed(tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for app in apps:
            await app.aclose()
        await fake.stop()


def replies_to(fake: FakeDiscord, question: str) -> list[int]:
    return [
        mid
        for mid in fake.created
        if str((fake.messages[mid].get("message_reference") or {}).get("message_id")) == question
    ]


async def answered(fake: FakeDiscord, question: str) -> int:
    """The one reply to ``question``, once it shows the answer and no Stop button."""
    async with asyncio.timeout(10):
        while True:
            replies = replies_to(fake, question)
            shown = fake.messages[replies[0]] if replies else {}
            if "395" in shown.get("content", "") and "reactbot:stop" not in str(shown):
                return replies[0]
            await asyncio.sleep(0.02)


async def test_each_process_answers_only_its_own_shards_guilds(
    redis_url: str, redis_prefix: str
) -> None:
    async with two_shards(redis_url, redis_prefix) as (fake, ran):
        sessions = {tuple(s.shard) for s in fake.live_sessions}
        assert sessions == {(0, 2), (1, 2)}
        questions = []
        for n, channel in enumerate((CHANNEL_A, CHANNEL_B, CHANNEL_A, CHANNEL_B)):
            # four people: one person's runs are limited to two at once across processes
            payload = fake.message_create(
                "What is 17*23+4?", channel_id=channel, author_id=3000 + n
            )
            await fake.dispatch("MESSAGE_CREATE", payload)
            questions.append(str(payload["id"]))
        for question in questions:
            await answered(fake, question)
        assert all(len(replies_to(fake, q)) == 1 for q in questions)
        # each guild's runs were the process running its shard's, and only those
        assert shard_of(GUILD_ID) == 1 and shard_of(OTHER_GUILD) == 0
        assert ran[1].seen == [f"discord:{CHANNEL_A}"] * 2
        assert ran[0].seen == [f"discord:{CHANNEL_B}"] * 2

        dm = fake.message_create("What is 17*23+4?", dm=True, mention_bot=False)
        await fake.dispatch("MESSAGE_CREATE", dm)
        await answered(fake, str(dm["id"]))
        assert len(ran[0].seen) == 3 and len(ran[1].seen) == 2  # DMs: shard 0 only


def test_shard_ids_are_checked_at_start(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "config.yaml"  # type: ignore[operator]
    for text, message in (
        ("discord: {shard_ids: [0]}", "needs discord.shard_count"),
        ("discord: {shard_count: 2, shard_ids: [2]}", "from 0 to 1"),
        ("discord: {shard_count: 2, shard_ids: [1, 1]}", "each shard once"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(path, {})
    path.write_text("discord: {shard_count: 4, shard_ids: [1, 3]}")
    assert load_config(path, {}).discord.shard_ids == (1, 3)
