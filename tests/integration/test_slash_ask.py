"""Slash ``/ask`` through ``Dispatcher.dispatch`` on Discord and Slack (the real discord.py
and Bolt over HTTP to the strict fakes): a refused one is acked within the platform's rule
(Discord: the interaction's first response within 3 s, said privately; Slack: the command's
HTTP answer within 3 s) in the shared words; one delivered twice is answered once; a Stop
press delivered twice acts once."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

from adapters import words
from adapters.slack.bot import WORKING
from core.scripted import Turn
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.slack_server import TEAM_ID
from tests.integration import test_slack_app
from tests.integration.test_discord import CALC_THEN_ANSWER, content_of, running
from tests.integration.test_slack_app import ASKER, CHANNEL, Harness, eventually

fake, make = test_slack_app.fake, test_slack_app.make
"""The Slack harness fixtures (the real Bolt app over HTTP, the strict fake)."""

COOLDOWN = 60
SLACK_ACK_WITHIN = 3.0
"""Slack's rule: a slash command's HTTP request is answered within 3 s, refused or not."""


def _cooled(text: str) -> bool:
    """``text`` is the shared cooldown words, for some wait within the window."""
    return text in {words.cooldown_message(s) for s in range(1, COOLDOWN + 1)}


def _callbacks(fake: FakeDiscord) -> list[Any]:
    return [c for c in fake.calls if c.method == "POST" and c.path.endswith("/callback")]


# ---- Discord ------------------------------------------------------------------------------


async def test_discord_a_refused_slash_ask_is_said_privately_within_three_seconds() -> None:
    async with running(CALC_THEN_ANSWER, cooldown_seconds=COOLDOWN) as h:
        await h.fake.dispatch("INTERACTION_CREATE", h.fake.interaction_create("ask", {"question": "first"}))  # fmt: skip
        await h.finished()
        sent = h.fake.clock()
        await h.fake.dispatch("INTERACTION_CREATE", h.fake.interaction_create("ask", {"question": "second"}))  # fmt: skip
        await h.fake.wait_for_calls(lambda c: c.path.endswith("/callback"), 2)
        first, refused = _callbacks(h.fake)
        assert first.json["type"] == 5, "the admitted one deferred"
        assert refused.status == 200 and refused.at - sent < 3.0, "the 3-second rule"
        assert refused.json["type"] == 4 and refused.json["data"]["flags"] & 64  # private
        assert _cooled(refused.json["data"]["content"]), refused.json
        await h.settled()
        h.model.assert_complete()  # the refused question reached no model


async def test_discord_a_slash_ask_delivered_twice_is_answered_once() -> None:
    async with running(CALC_THEN_ANSWER) as h:
        payload = h.fake.interaction_create("ask", {"question": "what is 17*23+4?"})
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)  # a second shard, a reconnect
        await h.finished()
        await h.settled()
        (callback,) = _callbacks(h.fake)
        assert callback.status == 200 and callback.json["type"] == 5
        starts = [c for c in h.fake.calls_to("PATCH", "/messages/@original") if "Starting" in content_of(c)]  # fmt: skip
        assert len(starts) == 1
        h.model.assert_complete()


async def test_discord_a_stop_press_delivered_twice_acts_once() -> None:
    stalling = [Turn("Thought: let me think about this for a long time", chunk_size=5, stall_after=3)]  # fmt: skip
    async with running(stalling) as h:
        await h.mention("a long question")
        reply = await h.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        custom_id = reply.json["components"][0]["components"][0]["custom_id"]
        press = h.fake.button_press(h.fake.created[0], custom_id)
        await h.fake.dispatch("INTERACTION_CREATE", press)
        await h.fake.dispatch("INTERACTION_CREATE", press)  # the same press again
        await h.finished()
        await h.settled()
        (callback,) = _callbacks(h.fake)  # a second answer would be Discord's 40060
        assert callback.status == 200
        final = h.edits(h.fake.created[0])[-1].json["content"]
        assert final.startswith("⏹️ Stopped by ada after step 1.")


# ---- Slack --------------------------------------------------------------------------------


def _command(h: Harness, text: str, trigger: str) -> str:
    return urllib.parse.urlencode({
        "command": "/ask", "text": text, "user_id": ASKER, "user_name": "ada",
        "channel_id": CHANNEL, "channel_name": "general", "team_id": TEAM_ID,
        "trigger_id": trigger, "response_url": h.fake.response_url(trigger),
    })  # fmt: skip


async def test_slack_a_refused_slash_ask_is_acked_within_three_seconds_in_the_shared_words(
    make: Any,
) -> None:
    h: Harness = await make(["Thought: ok.\nAction: finish[Fine.]"], cooldown_seconds=COOLDOWN)
    form = "application/x-www-form-urlencoded"
    status, first, _ = await h.post(_command(h, "one", h.fake.trigger()), form)
    assert status == 200 and json.loads(first)["text"] == WORKING
    status, refused, seconds = await h.post(_command(h, "two", h.fake.trigger()), form)
    assert status == 200 and seconds < SLACK_ACK_WITHIN
    said = json.loads(refused)
    assert said["response_type"] == "ephemeral" and _cooled(said["text"]), said
    await h.settled()
    assert len(h.fake.roots(CHANNEL)) == 1, "the refused question posted nothing"
    h.model.assert_complete()


async def test_slack_a_slash_ask_delivered_twice_is_answered_once(make: Any) -> None:
    h: Harness = await make(["Thought: ok.\nAction: finish[Fine.]"])
    form, body = "application/x-www-form-urlencoded", _command(h, "one", h.fake.trigger())
    status, first, _ = await h.post(body, form)
    assert status == 200 and json.loads(first)["text"] == WORKING
    started = time.monotonic()
    status, again, _ = await h.post(body, form)  # Slack's retry of the same command
    assert status == 200 and not again and time.monotonic() - started < SLACK_ACK_WITHIN
    await h.settled()
    await eventually(lambda: len(h.fake.roots(CHANNEL)) == 1)
    assert len(h.fake.roots(CHANNEL)) == 1
    h.model.assert_complete()
