"""Memories through the real discord.py client against the strict Discord fake (issue 43's
"done when", Discord half): a fact Ada tells in one channel of the server is used in another
channel for her and never for Mallory; a fact she tells in a DM never reaches a channel."""

from __future__ import annotations

from core.memories import Holder, InMemoryMemories, Memories
from tests.fakes.discord_server import CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.integration.test_discord import Harness, running
from tests.memories import TRAVELLING, recalled

OTHER_CHANNEL = CHANNEL_ID + 100
ADA, MALLORY = 1001, 2002


async def ask(h: Harness, text: str, runs: int, **where: object) -> None:
    """``text`` said to the bot, and its run ended (``runs``: how many have by then)."""
    await h.mention(text, **where)
    await h.finished(runs)
    await h.settled()


async def test_a_fact_travels_between_channels_for_its_teller_only_and_dms_stay_private() -> None:
    fake = FakeDiscord()
    fake.add_channel(OTHER_CHANNEL, name="random")
    async with running(TRAVELLING, fake=fake) as h:
        assert h.bot.cog is not None
        memories = Memories(InMemoryMemories())
        h.bot.cog.services.agent.memories = memories  # memory.enabled, as App.create wires it
        model = h.model

        await ask(h, "Remember that I manage the payments team", 1)
        kept = await memories.store.list(Holder.person("discord", str(ADA)))
        assert [(m.where.space, m.where.place, m.where.private) for m in kept] == [
            (str(GUILD_ID), f"discord:{CHANNEL_ID}", False)
        ]
        await ask(h, "Which team do I manage?", 2, channel_id=OTHER_CHANNEL)
        assert "I manage the payments team" in recalled(model, 2), "Ada's, in another channel"
        await ask(
            h,
            "Which team do I manage?",
            3,
            channel_id=OTHER_CHANNEL,
            author_id=MALLORY,
            name="mallory",
        )
        assert recalled(model, 3) == "", "never for Mallory"

        await ask(h, "remember my salary is 100k", 4, dm=True, mention_bot=False)
        assert "payments" not in recalled(model, 4), "a server's fact is not recalled in a DM"
        await ask(h, "what do you know?", 5, dm=True, mention_bot=False)
        assert "my salary is 100k" in recalled(model, 6), "a DM's fact, in her DM"
        await ask(h, "what do you know about me?", 6, channel_id=OTHER_CHANNEL)
        assert "salary" not in recalled(model, 7) and "payments" in recalled(model, 7)
        model.assert_complete()
