"""A hostile review of memories (issue 43): what an attacker, or just the internet, can put
into a memory, and where a memory could travel that it must not.

Each test names the hole it closes; docs/memory.md keeps the rules."""

from __future__ import annotations

import asyncio
import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.agent import Agent, AgentSettings
from core.errors import StoreUnavailable
from core.events import Finished, Notice
from core.memories import (
    Asking,
    Holder,
    InMemoryMemories,
    Memories,
    Memory,
    MemoryRefused,
    MemorySettings,
    Where,
    memory_line,
    recallable,
)
from core.remembering import UNAVAILABLE
from core.scripted import ScriptedModel
from core.text import BIDI_CONTROLS
from core.tools import ToolRegistry

T1_C1 = Where("slack", "T1", "slack:T1:C1", private=False)
T1_DM = Where("slack", "T1", "slack:T1:D1", private=True)
T1_DM_AGAIN = Where("slack", "T1", "slack:T1:D7", private=True)
T2_DM = Where("slack", "T2", "slack:T2:D9", private=True)

# Every kind of character, lone surrogates (which a model's JSON may carry: "\ud800") too.
any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=700)

KEPT_INVISIBLE = frozenset("\u200c\u200d")
"""ZWNJ and ZWJ: Persian words and emoji sequences need them; they hide no text."""


def hidden(ch: str) -> bool:
    """A character people do not see in a listing but a model reads (or a codec refuses)."""
    return (
        unicodedata.category(ch) in ("Cc", "Cf", "Cs") and ch not in KEPT_INVISIBLE
    ) or ch in BIDI_CONTROLS


# ---- travel -----------------------------------------------------------------------------


def test_a_dm_fact_stays_in_the_dms_of_its_own_workspace() -> None:
    """Hole: a fact told in a Slack DM in workspace T1 was recalled in a DM in workspace T2
    for whoever has the same user id there. Slack user ids (``U…``) are the workspace's own:
    another workspace's ``U1`` can be another person, and even the same person's two
    workspaces are two organisations."""
    fact = Memory("m1", "my salary is 10", "person", "U1", T1_DM, 1.0)
    assert recallable(fact, Asking("U1", "Ada", False, T1_DM_AGAIN)), "their DMs there"
    assert not recallable(fact, Asking("U1", "Ada", False, T2_DM)), "not another workspace's"


# ---- hostile text ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=any_text)
def test_a_remembered_fact_holds_nothing_hidden_and_any_store_can_keep_it(text: str) -> None:
    """Hole: ``remember`` kept control characters, bidi overrides, invisible tag characters
    (a hidden "ignore your instructions" that a listing does not show but the model reads)
    and lone surrogates (which Redis cannot encode: the write failed as an unexplained
    error, not a line to the model)."""
    memories = Memories(InMemoryMemories(), MemorySettings(max_chars=500))
    ada = Asking("U1", "Ada", False, T1_C1)
    try:
        kept = asyncio.run(memories.remember(ada, text, "person"))
    except MemoryRefused:
        return
    assert not any(hidden(ch) for ch in kept.text), ascii(kept.text)
    assert 0 < len(kept.text) <= 500
    kept.text.encode("utf-8")  # every store (Redis, JSON) can keep it
    memory_line(kept).encode("utf-8")


async def test_a_fact_of_only_invisible_characters_is_empty() -> None:
    memories = Memories(InMemoryMemories())
    ada = Asking("U1", "Ada", False, T1_C1)
    try:
        await memories.remember(ada, "\u202e\u200b\U000e0041\x00\ud800", "person")
    except MemoryRefused as refused:
        assert "empty" in str(refused)
    else:
        raise AssertionError("an invisible fact was kept")


async def test_emoji_sequences_and_persian_words_are_kept_whole() -> None:
    memories = Memories(InMemoryMemories())
    ada = Asking("U1", "Ada", False, T1_C1)
    family, word = (
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
    )
    kept = await memories.remember(ada, f"my family {family} says {word}", "person")
    assert family in kept.text and word in kept.text


# ---- bounds ------------------------------------------------------------------------------


async def test_a_memory_longer_than_the_recall_does_not_hide_the_older_ones() -> None:
    """Hole: the recall stopped at the first memory that did not fit, so one long memory
    (``max_chars`` above ``recall_chars``, or kept before ``max_chars`` was lowered) hid
    every older memory of the person on every run."""
    store = InMemoryMemories()
    await store.add(Memory("m1", "call me Ada", "person", "U1", T1_C1, 1.0), limit=9)
    await store.add(Memory("m2", "x" * 400, "person", "U1", T1_C1, 2.0), limit=9)
    memories = Memories(store, MemorySettings(recall_chars=200))
    given = await memories.recall(Asking("U1", "Ada", False, T1_C1))
    assert [m.id for m in given] == ["m1"]


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=120), min_size=1, max_size=12),
    room=st.integers(min_value=0, max_value=600),
)
@example(texts=["call me Ada", "x" * 120], room=100)
def test_the_recall_never_passes_recall_chars_and_keeps_newest_first(
    texts: list[str], room: int
) -> None:
    store = InMemoryMemories()
    for i, text in enumerate(texts):
        fact = Memory(f"m{i:08x}", text, "person", "U1", T1_C1, float(i + 1))
        asyncio.run(store.add(fact, limit=100))
    memories = Memories(store, MemorySettings(recall_chars=room))
    given = asyncio.run(memories.recall(Asking("U1", "Ada", False, T1_C1)))
    assert sum(len(memory_line(m)) + 1 for m in given) <= room
    assert [m.at for m in given] == sorted((m.at for m in given), reverse=True)
    left = [m for m in asyncio.run(store.list(Holder.person("slack", "U1"))) if m not in given]
    for m in left:  # nothing left out that would still have fitted after the newer ones
        newer = sum(len(memory_line(g)) + 1 for g in given if g.at > m.at)
        assert newer + len(memory_line(m)) + 1 > room


# ---- an outage ---------------------------------------------------------------------------


class DeadStore(InMemoryMemories):
    async def list(self, holder: Holder) -> list[Memory]:
        raise StoreUnavailable("Redis at 127.0.0.1:1/0 failed to read memories")


async def test_a_recall_the_store_did_not_answer_is_said_to_the_person() -> None:
    """Hole: a recall the store did not answer went into the trace's notices only: the
    person was never told their memories were not used (and the ``memory`` notice kind
    would have said the conversation's history was lost, which it was not)."""
    model = ScriptedModel(["Thought: ok\nAction: finish[ok]"])
    bot = Agent(model, ToolRegistry(), memories=Memories(DeadStore()), settings=AgentSettings())
    ran = bot.start(
        "hi", conversation="c", user="Ada", user_id="U1", asking=Asking("U1", "Ada", False, T1_C1)
    )
    notices = []
    async for event in ran.events():
        if isinstance(event, Notice):
            notices.append(event)
        if isinstance(event, Finished):
            break
    assert [(n.kind, n.text) for n in notices] == [("info", UNAVAILABLE)]
