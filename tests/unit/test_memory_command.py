"""The shared memory command handler (issue 43, item 5): what a person sees and deletes,
the same on every surface; a hostile memory is escaped by the surface's own escaping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from adapters.discord.render import sanitize
from adapters.dispatch.intents import Actor, MemoryAction, MemoryScope
from adapters.dispatch.intents import Memory as MemoryIntent
from adapters.dispatch.intents import Where as Place
from adapters.dispatch.memory import listing, memory_reply, parse
from adapters.slack.markdown import escape
from core.errors import StoreUnavailable
from core.memories import Holder, InMemoryMemories, Memories, MemorySettings, Where
from tests.memories import SLACK_C1, SLACK_C2, SLACK_DM, memory

HOSTILE = "@everyone <!channel> [x](https://evil) <@123>"


def intent(
    action: MemoryAction = "list",
    *,
    user: str = "U1",
    admin: bool = False,
    where: Where = SLACK_C1,
    ident: str = "",
    scope: MemoryScope = "me",
) -> MemoryIntent:
    actor = Actor("slack", user, f"slack:T1:{user}", user.lower(), admin=admin)
    place = Place("slack", "channel", where.place)
    return MemoryIntent(
        event="e1", actor=actor, where=place, place=where, action=action, id=ident, scope=scope
    )


async def kept() -> Memories:
    memories = Memories(InMemoryMemories())
    for m in (
        memory("m1", "I manage payments", at=100.0, where=SLACK_C1),
        memory("m2", "my salary is 100k", at=200.0, where=SLACK_DM),
        memory("m3", "Bob's fact", by="U2", at=300.0, where=SLACK_C1),
        memory("m4", "we deploy on Thursdays", at=400.0, scope="channel", where=SLACK_C1),
        memory("m5", HOSTILE, at=500.0, where=SLACK_C2),
    ):
        assert await memories.store.add(m, limit=10) is None
    return memories


def missing(ident: str) -> str:
    return words.memory_not_found(f"“{ident}”")


async def say(memories: Memories | None, i: MemoryIntent) -> str:
    return await memory_reply(i, memories, escape=escape, room=3000)


async def test_a_person_sees_their_own_recalled_here_and_admins_the_channels() -> None:
    memories = await kept()
    mine = await say(memories, intent())
    assert "m1 · I manage payments · yours · 1970-01-01" in mine
    assert "m5" in mine, "told in another channel of the workspace: recalled here"
    assert "m2" not in mine and "salary" not in mine, "a DM's fact is never listed in a channel"
    assert "m3" not in mine and "m4" not in mine, "not Bob's; not the channel's for a non-admin"
    assert "m4 · we deploy on Thursdays · this channel's" in await say(memories, intent(admin=True))
    assert "m2 · my salary is 100k" in await say(memories, intent(where=SLACK_DM))


async def test_forget_deletes_only_what_the_actor_may() -> None:
    memories = await kept()
    assert await say(memories, intent("forget", user="U2", ident="m1")) == (missing("m1"))
    assert await say(memories, intent("forget", ident="m4")) == missing("m4")
    assert await say(memories, intent("forget", ident="m2")) == missing("m2")
    assert await say(memories, intent("forget", ident="m1")) == words.memory_forgotten("m1")
    assert [m.id for m in await memories.store.list(Holder.person("slack", "U1"))] == ["m5", "m2"]
    admin = intent("forget", ident="m4", admin=True)
    assert await say(memories, admin) == words.memory_forgotten("m4")
    assert await memories.store.list(Holder.channel(SLACK_C1)) == []


async def test_clear_clears_the_actors_own_here_and_the_channels_for_its_admins() -> None:
    memories = await kept()
    assert await say(memories, intent("clear", scope="channel")) == words.MEMORY_ONLY_ADMINS
    assert await say(memories, intent("clear")) == words.memory_cleared(2, "me")
    assert [m.id for m in await memories.store.list(Holder.person("slack", "U1"))] == ["m2"]
    assert [m.id for m in await memories.store.list(Holder.person("slack", "U2"))] == ["m3"]
    cleared = await say(memories, intent("clear", scope="channel", admin=True))
    assert cleared == words.memory_cleared(1, "channel")
    assert await say(memories, intent()) == words.MEMORY_NONE


async def test_memory_off_and_a_store_that_does_not_answer_each_get_one_line() -> None:
    assert await say(None, intent()) == words.MEMORY_OFF

    class Down(InMemoryMemories):
        async def list(self, *holders: Holder) -> list:  # type: ignore[type-arg]
            raise StoreUnavailable("down")

    assert await say(Memories(Down()), intent()) == words.MEMORY_UNREADABLE
    assert await say(Memories(Down()), intent("clear")) == words.MEMORY_UNREADABLE


async def test_a_hostile_memory_is_listed_inert_by_each_surfaces_escaping() -> None:
    memories = await kept()
    slack = await say(memories, intent())
    assert "<!channel>" not in slack and "@everyone" not in slack and "<@123>" not in slack
    echoed = await say(memories, intent("forget", ident="<!channel>"))
    assert echoed == missing("&lt;!channel&gt;"), "the id typed is echoed escaped"
    discord = await memory_reply(intent(), memories, escape=sanitize, room=2000)
    assert "@everyone" not in discord and "](" not in discord and "<@123>" not in discord


@given(count=st.integers(0, 300), room=st.integers(400, 4000), size=st.integers(1, 500))
def test_a_long_listing_shows_the_newest_that_fit_and_counts_the_rest(
    count: int, room: int, size: int
) -> None:
    found = [
        memory(f"m{i:08x}", "x" * size, at=float(1000 - i), where=SLACK_C1) for i in range(count)
    ]
    text = listing(found, escape=escape, room=room)
    assert len(text) <= room
    lines = text.splitlines()[1:]
    if count == 0:
        assert text == words.MEMORY_NONE
        return
    listed = [ln for ln in lines if ln.startswith("m")]
    assert [ln.split(" · ")[0] for ln in listed] == [m.id for m in found[: len(listed)]]
    if len(listed) < count:
        assert lines[-1] == words.memory_more(count - len(listed))


async def test_with_channel_writers_anyone_everyone_here_manages_the_channels() -> None:
    memories = await kept()
    memories.settings = MemorySettings(channel_writers="anyone")
    assert "m4 · we deploy on Thursdays" in await say(memories, intent(user="U2"))
    assert await say(memories, intent("forget", user="U2", ident="m4")) == (
        words.memory_forgotten("m4")
    )


def test_the_commands_words_parse_to_one_action() -> None:
    assert parse("") == parse("list") == ("list", "", "me")
    assert parse("forget m1") == ("forget", "m1", "me")
    assert parse("clear") == ("clear", "", "me")
    assert parse("clear channel") == ("clear", "", "channel")
    assert parse("forget") is None and parse("forget a b") is None and parse("wipe") is None
