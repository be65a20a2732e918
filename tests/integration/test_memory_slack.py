"""Memories through the real bolt app and Web API client against the strict Slack fake
(issue 43's "done when", Slack half): a fact Ada tells in one channel is used in another
channel of the workspace for her and never for Bob; a fact she tells in a DM never reaches a
channel; a fact forgotten is gone from the next run."""

from __future__ import annotations

from typing import Any

from core.memories import Holder, InMemoryMemories, Memories
from tests.fakes.slack_server import TEAM_ID
from tests.integration.test_slack_app import ASKER, CHANNEL, Harness, fake, make  # noqa: F401
from tests.memories import TRAVELLING, recalled

OTHER_CHANNEL = "C2RANDOM"
BOB = "U2BOB"


async def dm(h: Harness, text: str, *, ts: str) -> None:
    event = {"type": "message", "channel": "D1ADA", "channel_type": "im", "user": ASKER}
    await h.event({**event, "ts": ts, "text": text}, event_id=f"Ev{ts}")
    await h.settled()


async def ask(h: Harness, text: str, *, user: str = ASKER, channel: str = CHANNEL) -> None:
    status, _, _ = await h.ask(text, user=user, channel=channel)
    assert status == 200
    await h.settled()


async def test_a_fact_travels_between_channels_for_its_teller_only_and_dms_stay_private(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make(
        [
            *TRAVELLING,
            "Thought: gone\nAction: forget[payments]",
            "Thought: done\nAction: finish[Forgotten.]",
            "Thought: ok\nAction: finish[ok]",
        ],
        streaming="update",
    )
    memories = Memories(InMemoryMemories())
    h.bot.agent.memories = memories  # memory.enabled, as App.create wires it
    model = h.model

    await ask(h, "Remember that I manage the payments team")
    kept = await memories.store.list(Holder.person("slack", ASKER))
    assert [(m.text, m.where.place, m.where.private) for m in kept] == [
        ("I manage the payments team", f"slack:{TEAM_ID}:{CHANNEL}", False)
    ]
    await ask(h, "Which team do I manage?", channel=OTHER_CHANNEL)
    assert "I manage the payments team" in recalled(model, 2), "Ada's, in another channel"
    await ask(h, "Which team do I manage?", user=BOB, channel=OTHER_CHANNEL)
    assert recalled(model, 3) == "", "never for Bob"

    await dm(h, "remember my salary is 100k", ts="7.1")
    assert "payments" not in recalled(model, 4), "a channel's fact is not recalled in a DM"
    await dm(h, "what do you know?", ts="7.2")
    assert "my salary is 100k" in recalled(model, 6), "a DM's fact, in her DM"
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "salary" not in recalled(model, 7) and "payments" in recalled(model, 7)

    await ask(h, "forget that I manage payments")
    await ask(h, "what do you know about me?", channel=OTHER_CHANNEL)
    assert "payments" not in recalled(model, 10), "a deletion holds on the next run"
    model.assert_complete()
