"""Memories across conversations (issue 43): the in-memory store keeps the store's rules,
the rule of travel holds cell by cell, and a long randomized conversation of many people
never gives one person's fact to another or to a more public place."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.memories import (
    Asking,
    Holder,
    InMemoryMemories,
    Memories,
    Memory,
    MemoryRefused,
    MemorySettings,
    Scope,
    Where,
    memory_line,
    memory_lines,
    recallable,
)
from core.prompt import fence
from tests.memories import check_memory_store, memory

DM = Where("slack", "T1", "slack:T1:D1", private=True)
DM_OTHER_TEAM = Where("slack", "T2", "slack:T2:D9", private=True)
C1 = Where("slack", "T1", "slack:T1:C1", private=False)
C2 = Where("slack", "T1", "slack:T1:C2", private=False)
OTHER_TEAM = Where("slack", "T2", "slack:T2:C1", private=False)
DISCORD = Where("discord", "T1", "slack:T1:C1", private=False)


async def test_the_in_memory_store_keeps_the_rules() -> None:
    await check_memory_store(InMemoryMemories())


def asking(user: str, where: Where, *, admin: bool = False) -> Asking:
    return Asking(user, user.lower(), admin, where)


TRAVEL = [
    # scope, told by, told where, asked by, asked where, recalled
    ("person", "U1", DM, "U1", DM, True),
    (
        "person",
        "U1",
        DM,
        "U1",
        DM_OTHER_TEAM,
        False,
    ),  # another workspace's U1 (test_memory_hostile)
    ("person", "U1", DM, "U1", C1, False),  # never in a channel
    ("person", "U1", DM, "U2", DM, False),  # never for another
    ("person", "U1", C1, "U1", C1, True),
    ("person", "U1", C1, "U1", C2, True),  # the same workspace's channels
    ("person", "U1", C1, "U1", OTHER_TEAM, False),  # another workspace
    ("person", "U1", C1, "U1", DM, False),  # channels only
    ("person", "U1", C1, "U2", C1, False),  # never for another, even where it was told
    ("person", "U1", C1, "U1", DISCORD, False),  # another platform
    ("channel", "U1", C1, "U1", C1, True),
    ("channel", "U1", C1, "U2", C1, True),  # anyone in that channel
    ("channel", "U1", C1, "U1", C2, False),  # it stays in its channel
    ("channel", "U1", C1, "U1", DM, False),
    ("channel", "U1", DM, "U1", DM, True),
    ("channel", "U1", C1, "U1", DISCORD, False),
]


@pytest.mark.parametrize(("scope", "by", "told", "asker", "here", "recalled"), TRAVEL)
def test_the_rule_of_travel(
    scope: Scope, by: str, told: Where, asker: str, here: Where, recalled: bool
) -> None:
    fact = memory("m1", "a fact", by=by, at=1.0, scope=scope, where=told)
    assert recallable(fact, asking(asker, here)) is recalled


async def test_a_long_conversation_of_many_people_gives_nobody_another_ones_fact() -> None:
    """1,000 turns in random places of two workspaces: each person tells facts (their own,
    or the channel's) and asks; every recalled fact is theirs and told somewhere no more
    public, or the channel's own. Checked against a plain record of who told what where."""
    rng = random.Random(43)
    people = [f"U{i}" for i in range(8)]
    places = [C1, C2, OTHER_TEAM] + [
        Where("slack", team, f"slack:{team}:D{user}", private=True)
        for team in ("T1", "T2")
        for user in people
    ]
    memories = Memories(InMemoryMemories(), MemorySettings(recall_chars=100_000))
    told: dict[str, tuple[str, Where, Scope]] = {}
    recalled_any = 0
    for turn in range(1000):
        user = rng.choice(people)
        here = rng.choice([p for p in places if not p.private or p.place.endswith(user)])
        me = asking(user, here, admin=rng.random() < 0.3)
        if rng.random() < 0.4:
            scope: Scope = "channel" if rng.random() < 0.2 and me.admin else "person"
            kept = await memories.remember(me, f"fact {turn} of {user}", scope)
            told[kept.id] = (user, here, scope)
            continue
        for shown in await memories.recall(me):
            recalled_any += 1
            by, where, scope = told[shown.id]
            assert shown.text.endswith(f"of {by}")
            if scope == "channel":
                assert where.place == here.place
                continue
            assert by == user, "a person's fact went to another person"
            assert where.private == here.private, "a fact travelled to a more public place"
            if not where.private:
                assert where.space == here.space, "a fact left its workspace"
    assert recalled_any > 500, "the test recalled enough to mean something"


def settings(**given: object) -> MemorySettings:
    return MemorySettings(**given)  # type: ignore[arg-type]


async def test_remember_checks_size_scope_and_limit_and_names_the_oldest() -> None:
    clock = iter(range(100, 200))
    memories = Memories(
        InMemoryMemories(), settings(max_per_user=2, max_chars=20), lambda: next(clock)
    )
    ada = asking("U1", C1)
    with pytest.raises(MemoryRefused, match="at most 20"):
        await memories.remember(ada, "x" * 21, "person")
    with pytest.raises(MemoryRefused, match="empty"):
        await memories.remember(ada, "  \n ", "person")
    with pytest.raises(MemoryRefused, match="admins"):
        await memories.remember(ada, "we ship", "channel")
    first = await memories.remember(ada, "I   manage\npayments", "person")
    assert first.text == "I manage payments", "kept on one line"
    await memories.remember(ada, "call me Ada", "person")
    with pytest.raises(MemoryRefused) as refused:
        await memories.remember(ada, "one more", "person")
    assert first.id in str(refused.value) and "manage payments" in str(refused.value)
    assert len(await memories.store.list(Holder.person("slack", "U1"))) == 2, "none dropped"
    anyone = Memories(InMemoryMemories(), settings(channel_writers="anyone"))
    assert (await anyone.remember(ada, "we ship", "channel")).scope == "channel"
    admin = asking("U1", C1, admin=True)
    assert (await memories.remember(admin, "we ship", "channel")).scope == "channel"


async def test_forget_deletes_only_what_the_asker_may() -> None:
    memories = Memories(InMemoryMemories())
    ada, bob = asking("U1", C1), asking("U2", C1)
    mine = await memories.remember(ada, "I manage payments", "person")
    theirs = await memories.remember(bob, "I manage payments too", "person")
    ours = await memories.remember(asking("U3", C1, admin=True), "we deploy Thursdays", "channel")
    with pytest.raises(MemoryRefused, match="No memory"):
        await memories.forget(ada, theirs.id)
    with pytest.raises(MemoryRefused, match="No memory"):
        await memories.forget(ada, ours.id)  # the channel's: its admins'
    with pytest.raises(MemoryRefused, match="Say which"):
        await memories.forget(ada, " ")
    assert await memories.forget(ada, "PAYMENTS") == [mine], "by words, only their own"
    assert [m.id for m in await memories.recall(bob)] == [ours.id, theirs.id]
    assert await memories.forget(asking("U9", C1, admin=True), ours.id) == [ours]


async def test_forget_by_words_that_match_several_asks_for_an_id() -> None:
    memories = Memories(InMemoryMemories())
    ada = asking("U1", C1)
    a = await memories.remember(ada, "the deploy is on Thursday", "person")
    b = await memories.remember(ada, "the deploy needs a review", "person")
    with pytest.raises(MemoryRefused, match="2 memories match") as refused:
        await memories.forget(ada, "deploy")
    assert a.id in str(refused.value) and b.id in str(refused.value)
    assert len(await memories.recall(ada)) == 2, "nothing deleted on a doubt"


async def test_recall_is_newest_first_within_its_characters() -> None:
    clock = iter(range(1, 100))
    memories = Memories(InMemoryMemories(), settings(recall_chars=220), lambda: next(clock))
    ada = asking("U1", C1)
    kept = [
        await memories.remember(ada, f"fact number {i} " + "x" * 40, "person") for i in range(5)
    ]
    given = await memories.recall(ada)
    assert [m.id for m in given] == [kept[4].id, kept[3].id], "the newest that fit"
    assert sum(len(memory_line(m)) + 1 for m in given) <= 220


memory_texts = st.text(min_size=1, max_size=600)


@given(text=memory_texts, private=st.booleans(), scope=st.sampled_from(["person", "channel"]))
def test_a_memory_round_trips_and_reads_as_one_line(text: str, private: bool, scope: Scope) -> None:
    kept = memory("m1a2b3c4", text, at=1.7e9, scope=scope, where=Where("slack", "T", "p", private))
    assert Memory.from_json(kept.to_json()) == kept
    line = memory_line(kept)
    assert "\n" not in line and "\r" not in line and line.startswith("m1a2b3c4 · ")
    fenced = fence(memory_lines([kept, kept]), "memory")
    inner = fenced.removeprefix("<memory>\n").removesuffix("\n</memory>")
    assert "<" not in inner and ">" not in inner, "nothing inside can close or open a tag"


@given(raw=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_an_unreadable_stored_value_is_skipped_not_raised(raw: str | bytes) -> None:
    read = Memory.from_json(raw)  # never raises: a value another version wrote is skipped
    assert read is None or isinstance(read, Memory)


@pytest.mark.parametrize("at", ["NaN", "Infinity", "1e300", "-1"])
def test_a_stored_date_no_line_could_show_is_unreadable(at: str) -> None:
    kept = memory("m1", "x", at=1.0, where=C1).to_json().replace('"at": 1.0', f'"at": {at}')
    assert Memory.from_json(kept) is None
