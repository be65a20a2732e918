"""One room for the whole process, on every surface (issue 25 item 4): Discord (discord.py
against the fake Discord) and Slack (the bolt app over HTTP against the fake Slack) served
by one process share ``agent.max_concurrent_runs``, and while the event loop is late
(``ops.max_loop_lag``) a question on either is told at once, in the same words, that the bot
is busy; each refusal is counted by platform and reason."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from adapters.room import BUSY, Room
from core.looplag import LoopLag
from core.scripted import Turn
from tests.fakes.discord_server import CHANNEL_ID
from tests.integration.test_admission_table import cog_of, replies
from tests.integration.test_discord import running
from tests.integration.test_slack_app import eventually, fake, make  # noqa: F401 - fixtures

STALLING = Turn("Thought: thinking for a long while", chunk_size=4, stall_after=2)
QUICK = "Thought: easy.\nAction: finish[ok]"


async def test_the_process_s_runs_are_counted_across_surfaces(make: Any) -> None:  # noqa: F811
    room = Room(1)
    async with running([STALLING], room=room) as discord:
        slack = await make([QUICK], room=room)
        await discord.mention("think about this", author_id=1001)
        await eventually(lambda: len(cog_of(discord).answering.running) == 1)
        _, body, _ = await slack.ask("and this?", user="U2BOB")
        assert json.loads(body)["text"] == BUSY
        assert room.refused == {("slack", "capacity"): 1}
        for run_id in cog_of(discord).answering.running:
            await cog_of(discord).answering.stop(run_id, by="the test")
        await discord.settled()
        assert room.taken == 0
        _, body, _ = await slack.ask("now?", user="U2BOB")
        assert json.loads(body)["text"] != BUSY, "the room was given back"
        await slack.settled()


async def test_a_late_loop_refuses_new_questions_on_every_surface(make: Any) -> None:  # noqa: F811
    room = Room(100, lag=LoopLag(interval=0.02, window=1.0), max_lag=0.1)
    async with running([QUICK], room=room) as discord:
        slack = await make([QUICK], room=room)
        assert room.lag is not None and room.lag.running, "started with the first surface"
        time.sleep(0.3)  # noqa: ASYNC251 - the loop runs late: the point
        _, body, _ = await slack.ask("anyone there?")
        assert json.loads(body)["text"] == BUSY
        await discord.mention("anyone there?", author_id=1001)
        async with asyncio.timeout(10):
            while not replies(discord):  # noqa: ASYNC110 - the fake's record
                await asyncio.sleep(0.01)
        assert replies(discord) == [BUSY]
        assert room.refused == {("slack", "overloaded"): 1, ("discord", "overloaded"): 1}
        assert discord.fake.calls_to("POST", f"/{CHANNEL_ID}/messages"), "a reply, at once"
        await asyncio.sleep(1.1)  # on time for the probe's whole window
        _, body, _ = await slack.ask("and now?")
        assert json.loads(body)["text"] != BUSY
        await slack.settled()
