"""Memories through the real discord.py client against the strict Discord fake (issue 43's
"done when", Discord half): a fact Ada tells in one channel of the server is used in another
channel for her and never for Mallory; a fact she tells in a DM never reaches a channel."""

from __future__ import annotations

from adapters import words
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


HOSTILE = "@everyone <@2002> [x](https://evil)"


async def memory_command(h: Harness, *, user: int = ADA, **options: str) -> str:
    """``/reactbot memory`` through discord.py: its ephemeral reply."""
    payload = h.fake.interaction_create(
        "reactbot", options, subcommand="memory", author_id=user, user_name=f"u{user}"
    )
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    call = await h.fake.wait_for_call(
        lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
    )
    data = call.json["data"]
    assert data["flags"] & 64, "ephemeral: only the person sees their memories"
    assert data["allowed_mentions"]["parse"] == []
    return str(data["content"])


async def test_the_memory_command_lists_and_forgets_and_the_next_run_no_longer_recalls() -> None:
    fake = FakeDiscord()
    fake.add_channel(OTHER_CHANNEL, name="random")
    turns = [
        'Thought: keep it\nAction: remember[{"fact": "I manage the payments team"}]',
        "Thought: kept\nAction: finish[Noted.]",
        f'Thought: keep it\nAction: remember[{{"fact": "{HOSTILE}"}}]',
        "Thought: kept\nAction: finish[Noted.]",
        "Thought: ok\nAction: finish[ok]",
    ]
    async with running(turns, fake=fake) as h:
        assert h.bot.cog is not None
        memories = Memories(InMemoryMemories())
        h.bot.cog.services.agent.memories = memories
        await ask(h, "Remember that I manage the payments team", 1)
        await ask(h, "Remember this", 2)
        kept = await memories.store.list(Holder.person("discord", str(ADA)))
        hostile, payments = kept  # newest first
        assert hostile.text == HOSTILE

        listed = await memory_command(h)
        assert f"{payments.id} · I manage the payments team · yours ·" in listed
        assert hostile.id in listed and "evil" in listed, "the hostile memory is listed"
        assert "@everyone" not in listed and "<@2002>" not in listed, "it cannot ping"
        assert "](" not in listed, "nor form a masked link"

        refused = await memory_command(h, user=MALLORY, action="forget", id=payments.id)
        assert refused == words.memory_not_found(f"“{payments.id}”"), "not Mallory's to forget"
        assert payments in await memories.store.list(Holder.person("discord", str(ADA)))
        gone = await memory_command(h, action="forget", id=payments.id)
        assert gone == words.memory_forgotten(payments.id)
        await ask(h, "Which team do I manage?", 3, channel_id=OTHER_CHANNEL)
        assert "payments" not in recalled(h.model, 4), "the next run no longer recalls it"
        assert hostile.id in recalled(h.model, 4)
        h.model.assert_complete()


SECRET_CHANNEL = CHANNEL_ID + 200
SECRET_THREAD = CHANNEL_ID + 201


async def test_a_fact_told_where_everyone_cannot_look_stays_there() -> None:
    """A channel whose overwrites deny @everyone VIEW_CHANNEL is closed: Ada's fact told
    there (or in a thread of it) is recalled there only, never in the server's open
    channels, and listed only there; her open channels' facts still reach it."""
    fake = FakeDiscord()
    fake.add_channel(OTHER_CHANNEL, name="random")
    fake.add_channel(SECRET_CHANNEL, name="leads")
    fake.restrict(SECRET_CHANNEL)
    fake.add_thread(SECRET_THREAD, parent=SECRET_CHANNEL)
    turns = [
        'Thought: keep it\nAction: remember[{"fact": "I am interviewing elsewhere"}]',
        "Thought: kept\nAction: finish[Noted.]",
        'Thought: keep it\nAction: remember[{"fact": "I manage the payments team"}]',
        "Thought: kept\nAction: finish[Noted.]",
        "Thought: ok\nAction: finish[ok]",
        "Thought: ok\nAction: finish[ok]",
    ]
    async with running(turns, fake=fake) as h:
        assert h.bot.cog is not None
        memories = Memories(InMemoryMemories())
        h.bot.cog.services.agent.memories = memories
        await ask(h, "Remember that I am interviewing elsewhere", 1, channel_id=SECRET_THREAD)
        (secret,) = await memories.store.list(Holder.person("discord", str(ADA)))
        assert (secret.where.place, secret.where.closed) == (f"discord:{SECRET_CHANNEL}", True)
        await ask(h, "Remember that I manage the payments team", 2, channel_id=OTHER_CHANNEL)
        await ask(h, "what do you know about me?", 3)
        assert "payments" in recalled(h.model, 4), "an open channel's fact, in another one"
        assert "interviewing" not in recalled(h.model, 4), "the hidden channel's stays there"
        await ask(h, "what do you know about me?", 4, channel_id=SECRET_CHANNEL)
        assert "interviewing" in recalled(h.model, 5) and "payments" in recalled(h.model, 5)

        assert secret.id not in await memory_command(h), "not listed in an open channel"
        payload = h.fake.interaction_create(
            "reactbot", {}, subcommand="memory", channel_id=SECRET_CHANNEL
        )
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        call = await h.fake.wait_for_call(
            lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
        )
        assert secret.id in call.json["data"]["content"], "listed where it was told"
        h.model.assert_complete()


async def test_a_channels_trace_thread_names_a_fact_told_elsewhere_by_id_only() -> None:
    """Ada's fact told in one channel is recalled for her in another, whose trace thread
    everyone there reads: it names the memory by id, never its text."""
    import json

    fake = FakeDiscord()
    fake.add_channel(OTHER_CHANNEL, name="random")
    turns = [
        'Thought: keep it\nAction: remember[{"fact": "I am interviewing at Acme"}]',
        "Thought: kept\nAction: finish[Noted.]",
        "Thought: ok\nAction: finish[ok]",
    ]
    async with running(turns, fake=fake) as h:
        assert h.bot.cog is not None
        memories = Memories(InMemoryMemories())
        h.bot.cog.services.agent.memories = memories
        await ask(h, "Remember that I am interviewing at Acme", 1)
        (fact,) = await memories.store.list(Holder.person("discord", str(ADA)))
        await ask(h, "what do you know about me?", 2, channel_id=OTHER_CHANNEL)
        assert "interviewing at Acme" in recalled(h.model, 2), "the model reads it whole"
        there = {OTHER_CHANNEL} | {
            int(c["id"]) for c in fake.channels.values() if c.get("parent_id") == str(OTHER_CHANNEL)
        }
        posted = json.dumps([m for m in fake.messages.values() if int(m["channel_id"]) in there])
        assert "recall_memories" in posted and fact.id in posted, "the thread says it was given"
        assert "Acme" not in posted, "but not what it says: the channel reads the thread"
        h.model.assert_complete()
