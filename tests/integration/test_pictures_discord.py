"""A tool's picture on Discord: attached to the final answer (the edit that ends the live
message uploads it), checked by its bytes; the real discord.py client against the strict
fake."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

from core.tools import ToolRegistry
from tests.fakes.discord_server import CHANNEL_ID, Call
from tests.integration.test_discord import content_of, tools
from tests.integration.test_discord_files import running
from tests.integration.test_pictures_telegram import CHART, TURNS


def _final(call: Call) -> bool:
    return call.method == "PATCH" and "Here is the chart." in content_of(call)


async def test_a_tools_picture_is_attached_to_the_final_answer() -> None:
    registry: ToolRegistry = tools()
    registry.add(CHART)
    async with running(TURNS, registry=registry) as h:
        payload = h.fake.message_create("chart the sales")
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        (edit,) = await h.fake.wait_for_calls(_final, 1, within=10)
        answer = [
            m
            for m in h.fake.messages.values()
            if m.get("channel_id") == str(CHANNEL_ID) and "Here is the chart." in m["content"]
        ]
    assert [a["filename"] for a in answer[0]["attachments"]] == ["picture-1.png"]
    assert edit.path.startswith(f"/channels/{CHANNEL_ID}/messages/")
