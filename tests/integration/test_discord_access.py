"""Who the Discord bot answers where, with the real discord.py client against the fake:
DMs to a restricted bot, private threads, runs in flight per user, overlong questions."""

from __future__ import annotations

import asyncio

from adapters import words
from core.scripted import Turn
from tests.fakes.discord_server import CHANNEL_ID, DM_CHANNEL_BASE, GUILD_ID, ROLE_ID, FakeDiscord
from tests.integration.test_discord import content_of, running

ANSWER = "Thought: easy.\nAction: finish[Hello.]"
STRANGER, MEMBER, MOD = 4242, 4343, 4444


def replies_in(fake: FakeDiscord, channel: int) -> list[str]:
    return [content_of(c) for c in fake.calls_to("POST", f"/channels/{channel}/messages")]


async def test_a_restricted_bot_refuses_a_strangers_dm_without_a_model_call() -> None:
    fake = FakeDiscord()
    fake.add_member(MEMBER, "member")
    async with running([ANSWER], fake=fake, allowed_guilds=(GUILD_ID,)) as h:
        await h.fake.dispatch(
            "MESSAGE_CREATE", h.fake.message_create("hi", dm=True, author_id=STRANGER)
        )
        refusal = await h.fake.wait_for_call(
            lambda c: c.path == f"/channels/{DM_CHANNEL_BASE + STRANGER}/messages"
        )
        assert content_of(refusal) == words.dms_for_members()
        looked_up = h.fake.calls_to("GET", f"/guilds/{GUILD_ID}/members/{STRANGER}")
        assert [c.status for c in looked_up] == [404]
        assert h.model.calls == []
        await h.fake.dispatch(
            "MESSAGE_CREATE", h.fake.message_create("hi", dm=True, author_id=MEMBER)
        )
        await h.finished()
        assert any(
            t.startswith("Hello.") for t in [content_of(c) for c in h.fake.calls_to("PATCH", "")]
        )
        h.model.assert_complete()


async def test_with_roles_listed_a_dm_needs_the_role_too() -> None:
    fake = FakeDiscord()
    fake.add_member(MEMBER, "member")
    fake.add_member(MOD, "mod", roles=(ROLE_ID,))
    async with running([ANSWER], fake=fake, allowed_roles=(ROLE_ID,)) as h:
        await h.fake.dispatch(
            "MESSAGE_CREATE", h.fake.message_create("hi", dm=True, author_id=MEMBER)
        )
        refusal = await h.fake.wait_for_call(
            lambda c: c.path == f"/channels/{DM_CHANNEL_BASE + MEMBER}/messages"
        )
        # a member of the guild without the role: the people list refuses (the shared rule)
        assert content_of(refusal) == words.NOT_LISTED
        await h.fake.dispatch("MESSAGE_CREATE", h.fake.message_create("hi", dm=True, author_id=MOD))
        await h.finished()
        h.model.assert_complete()


async def test_a_private_thread_never_shares_its_history_with_the_channel() -> None:
    fake = FakeDiscord()
    public, private = fake.new_id(), fake.new_id()
    fake.add_thread(public)
    fake.add_thread(private, private=True)
    async with running([ANSWER, ANSWER], fake=fake, per_thread=False) as h:
        await h.mention("in public", channel_id=public)
        await h.finished()
        await h.mention("in private", channel_id=private)
        await h.finished(2)
        assert await h.history.load(f"discord:{CHANNEL_ID}")  # per_thread off: the channel's
        assert await h.history.load(f"discord:{private}")  # the private thread keeps its own
        channel_history = await h.history.load(f"discord:{CHANNEL_ID}")
        assert not any("in private" in m["content"] for m in channel_history)
        assert await h.traces.last(f"discord:{private}") is not None


async def test_a_user_gets_max_runs_per_user_at_once() -> None:
    stalling = Turn("Thought: thinking slowly", chunk_size=2, stall_after=1)
    async with running([stalling], max_runs_per_user=1) as h:
        await h.mention("first")
        await h.fake.wait_for_call(lambda c: "Starting" in content_of(c))
        await h.mention("second")
        busy = await h.fake.wait_for_call(lambda c: "already have" in content_of(c))
        assert content_of(busy) == (
            "⏳ You already have a question running; ask again when one has finished."
        )
        await asyncio.sleep(0.1)
        assert len(h.model.calls) == 1


async def test_an_overlong_question_is_refused_before_any_model_call() -> None:
    async with running([]) as h:
        await h.mention("x" * 5000)
        refusal = await h.fake.wait_for_call(lambda c: "characters long" in content_of(c))
        assert "The question is 5,000 characters long; the limit is 4,000." in content_of(refusal)
        assert h.model.calls == []


async def test_a_fact_told_in_a_private_thread_never_reaches_the_channel() -> None:
    """Hole (memory review): a private thread's memories were kept under its parent
    channel, and a person's fact told there counted as told in the server's open channels:
    both were recalled in the public channel, in front of everyone there."""
    from core.memories import InMemoryMemories, Memories
    from core.prompt import MEMORY_LEAD

    fake = FakeDiscord()
    private = fake.new_id()
    fake.add_thread(private, private=True)
    keep = 'Thought: keep\nAction: remember[{"fact": "I am being let go"}]'
    async with running([keep, ANSWER, ANSWER, ANSWER], fake=fake, per_thread=False) as h:
        assert h.bot.cog is not None
        h.bot.cog.services.agent.memories = Memories(InMemoryMemories())
        await h.mention("remember I am being let go", channel_id=private)
        await h.finished()
        await h.mention("what do you know about me?")  # the parent channel
        await h.finished(2)
        await h.mention("and here?", channel_id=private)
        await h.finished(3)

        def given(call: int) -> str:
            return "".join(
                m["content"]
                for m in h.model.calls[call].messages
                if m["content"].startswith(MEMORY_LEAD)
            )

        assert "let go" not in given(2), "a private thread's fact reached the channel"
        assert "let go" in given(3), "it is still recalled where it was told"
        h.model.assert_complete()
