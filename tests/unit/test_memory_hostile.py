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


def test_the_hidden_characters_are_every_one_unicodedata_knows() -> None:
    """``plain_fact``'s character class, checked over all of Unicode as this Python has it."""
    from core.memories import plain_fact

    for cp in range(0x110000):
        ch = chr(cp)
        if ch.isspace() or 0x13439 <= cp <= 0x1343F:  # format characters from Unicode 15
            continue
        kept = plain_fact(f"a{ch}b") == f"a{ch}b"
        assert kept is not hidden(ch), f"U+{cp:04X} {unicodedata.category(ch)}"


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
    async def list(self, *holders: Holder) -> list[Memory]:
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


# ---- where memories are listed -----------------------------------------------------------

HOSTILE = (
    "@everyone @here <@123456789012345678> <!channel> <!here> <@U0BOSS> "
    "[log in](https://evil.example) <https://evil.example|log in> ‹/memory› </memory>"
)


@given(text=st.text(max_size=80))
@example(text=HOSTILE)
def test_a_recalled_memory_in_a_trace_thread_pings_nobody_and_links_nowhere(text: str) -> None:
    """The ``recall_memories`` step and ``remember``'s observation are shown in the trace
    thread of a channel: a remembered mention or masked link must stay text there."""
    import json as _json

    from adapters.discord.render import step_posts
    from adapters.slack.trace_thread import step_blocks
    from core.memories import memory_lines
    from core.remembering import RECALL_MEMORIES
    from core.trace import TraceStep

    fact = Memory("m1a2b3c4", HOSTILE + text, "person", "U1", T1_C1, 1.7e9)
    step = TraceStep(
        index=0,
        action=RECALL_MEMORIES,
        action_input="1 memories: m1a2b3c4",
        observation=memory_lines([fact]),
        started_at=1.0,
        ended_at=1.0,
    )
    slack = _json.dumps(step_blocks(step, "t1"))
    for ping in ("<!channel>", "<!here>", "<@U0BOSS>", "<https://evil.example|"):
        assert ping not in slack
    discord = "\n".join(p.content for p in step_posts(step))
    for ping in ("@everyone", "@here", "<@123456789012345678>", "](https://evil"):
        assert ping not in discord


def test_a_closed_places_fact_is_recalled_there_only() -> None:
    """A person's fact told in a closed place (a Discord private thread) stays there; one
    told in the open channels may still be recalled inside a closed place (less public)."""
    thread = Where("discord", "7", "discord:55", private=False, closed=True)
    other = Where("discord", "7", "discord:56", private=False, closed=True)
    channel = Where("discord", "7", "discord:42", private=False)
    told_there = Memory("m1", "I am being let go", "person", "U1", thread, 1.0)
    told_open = Memory("m2", "call me Ada", "person", "U1", channel, 1.0)

    def ada(where: Where) -> Asking:
        return Asking("U1", "Ada", False, where)

    assert recallable(told_there, ada(thread))
    assert not recallable(told_there, ada(channel)) and not recallable(told_there, ada(other))
    assert recallable(told_open, ada(thread))
    assert not recallable(told_there, Asking("U2", "Bob", False, thread))


def test_a_memory_kept_before_closed_places_still_reads() -> None:
    kept = Memory("m1", "x", "person", "U1", T1_C1, 1.0)
    old = kept.to_json().replace(", false]", "]")
    assert '"where": ["slack", "T1", "slack:T1:C1", false]' in old
    assert Memory.from_json(old) == kept
    closed = Memory("m1", "x", "person", "U1", Where("discord", "7", "d:5", False, True), 1.0)
    assert Memory.from_json(closed.to_json()) == closed
    assert Memory.from_json(kept.to_json().replace("false, false]", '"no", "yes"]')) == kept


async def test_an_eval_job_leaves_no_channel_memory_behind() -> None:
    """Hole: ``reactbot eval`` cleared only the eval person's memories; with
    ``memory.channel_writers: anyone`` a case's channel memories stayed in the store, with
    no TTL, for ever."""
    from bot.evals import EVAL_PLATFORM, EvalPerson

    where = Where(EVAL_PLATFORM, "eval", "eval:job1", private=False)
    person = EvalPerson(Asking("job1", "eval", False, where))
    store = InMemoryMemories()
    memories = Memories(store, MemorySettings(channel_writers="anyone"))
    await memories.remember(person.asking, "mine", "person")
    await memories.remember(person.asking, "ours", "channel")
    await memories.remember(person.elsewhere(1).asking, "theirs", "channel")
    for holder in person.holders(2):
        await store.clear(holder)
    assert store._held == {}, "nothing of the job is left"


async def test_a_full_holder_never_quotes_a_dm_fact_in_a_channel() -> None:
    """Hole: at the limit, ``remember`` named and quoted the holder's oldest memory, which
    may have been told in a DM (or another workspace): the refusal is an Observation, shown
    in the channel's trace thread and read by the model answering there."""
    store = InMemoryMemories()
    await store.add(Memory("m0", "my salary is 10", "person", "U1", T1_DM, 1.0), limit=9)
    await store.add(Memory("m1", "call me Ada", "person", "U1", T1_C1, 2.0), limit=9)
    memories = Memories(store, MemorySettings(max_per_user=2))
    try:
        await memories.remember(Asking("U1", "Ada", False, T1_C1), "one more", "person")
    except MemoryRefused as refused:
        said = str(refused)
    else:
        raise AssertionError("kept past the limit")
    assert "salary" not in said and "nothing was saved" in said
    assert "DM" in said or "elsewhere" in said, said
    try:  # in the DM itself, the oldest is named and quoted as before
        await memories.remember(Asking("U1", "Ada", False, T1_DM), "one more", "person")
    except MemoryRefused as refused:
        assert "m0" in str(refused) and "salary" in str(refused)


async def test_a_fact_told_in_a_slack_private_channel_stays_there() -> None:
    """Hole: Slack's ``app_mention`` carries no ``channel_type``, so a private channel (or a
    group DM) read as an open channel, and a person's fact told there was recalled in the
    workspace's public channels. ``conversations.info`` (the real client, the strict fake)
    now says which channels are closed; one Slack will not describe counts as closed."""
    import aiohttp
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.slack.payloads import from_event
    from adapters.slack.places import SlackPlaces
    from tests.fakes.slack_server import TOKEN, FakeSlack

    def mention(channel: str) -> dict[str, str]:
        return {"type": "app_mention", "channel": channel, "user": "U1", "text": "<@B> hi"}

    async with FakeSlack() as fake, aiohttp.ClientSession() as session:
        fake.private_channels.add("C0PRIVATE")
        fake.group_dms.add("C0GROUP")
        places = SlackPlaces(AsyncWebClient(token=TOKEN, base_url=fake.base_url, session=session))
        seen: dict[str, Where] = {}
        for n, channel in enumerate(("C0PRIVATE", "C0GROUP", "C0PUBLIC", "C0OTHER")):
            event = {**mention(channel), "ts": f"{n}.0"}
            question = from_event(event, event_id=f"Ev{n}", team="T1", bot_user_id="B")
            assert question is not None and not question.where.closed, "the payload cannot say"
            seen[channel] = (await places.placed(question)).where
    assert seen["C0PRIVATE"].closed, "is_private"
    assert seen["C0GROUP"].closed, "no mpim:read: Slack will not describe it, so closed"
    assert not seen["C0PUBLIC"].closed and not seen["C0OTHER"].closed
    secret = Memory("m1", "my salary is 10", "person", "U1", seen["C0PRIVATE"], 1.0)
    assert recallable(secret, Asking("U1", "Ada", False, seen["C0PRIVATE"])), "there"
    assert not recallable(secret, Asking("U1", "Ada", False, seen["C0PUBLIC"])), "not in public"
    said = Memory("m2", "call me Ada", "person", "U1", seen["C0PUBLIC"], 1.0)
    assert recallable(said, Asking("U1", "Ada", False, seen["C0PRIVATE"])), "open to closed"
