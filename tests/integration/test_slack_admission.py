"""Who gets a run on Slack, under load: the per-user limit and the replica's own limit hold
for a burst (the check and the reservation have no await between them), and an overlong
question is refused before any model call. The real bolt app over HTTP, the fake Slack."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from adapters.room import Room
from core.scripted import Turn
from tests.fakes.slack_server import message_text
from tests.integration.test_slack_app import (  # noqa: F401 - fixtures
    Harness,
    eventually,
    fake,
    make,
)

STALLING = Turn("Thought: thinking for a long while", chunk_size=4, stall_after=2)


async def test_a_burst_from_one_user_gets_max_runs_per_user(make: Any) -> None:  # noqa: F811
    h: Harness = await make([STALLING] * 3, max_runs_per_user=2)
    answers = await asyncio.gather(*(h.ask(f"question {i}") for i in range(8)))
    texts = [json.loads(body)["text"] for _, body, _ in answers]
    assert sum("Working on it" in t for t in texts) == 2
    busy = [t for t in texts if "Working on it" not in t]
    assert len(busy) == 6
    assert all("You already have 2 questions running" in t for t in busy)
    await eventually(lambda: len(h.bot.running) == 2)
    _, body, _ = await h.ask("another user", user="U2BOB")
    assert "Working on it" in json.loads(body)["text"], "the limit is per user"
    await eventually(lambda: len(h.bot.running) == 3)
    for run_id in list(h.bot.running):
        await h.press_stop(run_id, user="UADMIN")
    await h.settled()
    # the slots were given back: the same user may ask again
    h.model.turns.append("Thought: ok\nAction: finish[ok]")
    _, body, _ = await h.ask("after")
    assert "Working on it" in json.loads(body)["text"]
    await h.settled()


async def test_the_replicas_own_limit_holds_for_a_burst(make: Any) -> None:  # noqa: F811
    h: Harness = await make([STALLING] * 3, room=Room(3))
    answers = await asyncio.gather(*(h.ask("q", user=f"U{i:04d}") for i in range(10)))
    texts = [json.loads(body)["text"] for _, body, _ in answers]
    assert sum("Working on it" in t for t in texts) == 3
    assert sum("answering a lot of questions" in t for t in texts) == 7
    await eventually(lambda: len(h.bot.running) == 3)
    await h.bot.aclose()


async def test_an_overlong_question_is_refused_before_any_model_call(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make([])
    _, body, _ = await h.ask("why " * 2_000)
    text = json.loads(body)["text"]
    assert "The question is 7,999 characters long; the limit is 4,000." in text
    await h.settled()  # every task the bot spawned is done: none started a run
    assert h.model.calls == [] and not h.fake.roots()


async def test_a_restricted_bot_answers_dms_only_for_members_of_its_channels(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make(
        ["Thought: ok\nAction: finish[Hello.]"],
        allowed_channels=frozenset({"C1GENERAL"}),
        streaming="update",  # the answer as one root message, to look at
    )
    h.fake.channel_members["C1GENERAL"] = [f"U{i:05d}" for i in range(2500)] + ["U1ADA"]
    dm = {"type": "message", "channel_type": "im", "channel": "D0STRANGER", "ts": "1.1"}
    await h.event({**dm, "user": "U9STRANGER", "text": "hi"}, event_id="Ev1")
    await eventually(lambda: bool(h.fake.calls("chat.postEphemeral")))
    refusal = h.fake.calls("chat.postEphemeral")[0].args["text"]
    assert refusal == "I answer direct messages only for members of <#C1GENERAL>; ask me there."
    assert h.model.calls == [] and not h.fake.roots()
    pages = h.fake.calls("conversations.members")
    assert len(pages) == 3  # 2,501 members, 1,000 a page: every page was read
    await h.event({**dm, "channel": "D0ADA", "user": "U1ADA", "text": "hi"}, event_id="Ev2")
    await h.settled()
    assert "Hello." in message_text(h.root("D0ADA"))
    assert len(h.fake.calls("conversations.members")) == 3, "members are remembered a while"
    h.model.assert_complete()
