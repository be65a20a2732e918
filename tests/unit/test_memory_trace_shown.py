"""Who reads a run's trace (issue 43): the ``recall_memories`` step of a run in a shared
place is read by everyone there, so it lists only memories the travel rule lets reach that
place, and a person's fact told elsewhere shows there by its id, never its text (the model
still reads it whole). In a private place, or for a fact told in that very place, the text
is shown; ``forget`` and a full holder's refusal follow the same rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.memories import (
    HIDDEN_HERE,
    Asking,
    Holder,
    InMemoryMemories,
    Memories,
    Memory,
    MemoryRefused,
    MemorySettings,
    Where,
    recallable,
    shown_here,
    trace_line,
)
from core.remembering import RECALL_MEMORIES
from core.scripted import ScriptedModel
from tests.unit.test_memory_runs import C1, C2, DM, agent, memory_messages, run

CLOSED = Where("slack", "T1", "slack:T1:C9", private=False, closed=True)
OTHER_TEAM = Where("slack", "T2", "slack:T2:C1", private=False)
PLACES = (C1, C2, DM, CLOSED, OTHER_TEAM)


def ada(where: Where) -> Asking:
    return Asking("U1", "Ada", False, where)


async def kept(store: InMemoryMemories, ident: str, text: str, where: Where, **kw: str) -> Memory:
    memory = Memory(ident, text, kw.get("scope", "person"), kw.get("by", "U1"), where, 1.7e9)  # type: ignore[arg-type]
    assert await store.add(memory, limit=50) is None
    return memory


async def test_a_channels_trace_names_a_fact_told_elsewhere_by_id_only() -> None:
    store = InMemoryMemories()
    told_in_c1 = await kept(store, "m00000001", "I am interviewing at Acme", C1)
    told_in_c2 = await kept(store, "m00000002", "call me Ada", C2)
    ours = await kept(store, "m00000003", "we deploy on Thursdays", C2, scope="channel")
    await kept(store, "m00000004", "my salary is 100k", DM)
    await kept(store, "m00000005", "I am being let go", CLOSED)
    await kept(store, "m00000006", "Bob's own", C2, by="U2")
    model = ScriptedModel(["Thought: ok\nAction: finish[ok]"] * 2)
    bot = agent(model, Memories(store))

    trace = await run(bot, "what do you know about me?", ada(C2))
    (given,) = memory_messages(model, 0)
    for memory in (told_in_c1, told_in_c2, ours):
        assert memory.text in given, "the model reads each whole"
    step = next(s for s in trace.steps if s.action == RECALL_MEMORIES)
    shown = step.observation or ""
    assert "Acme" not in shown and f"m00000001 · {HIDDEN_HERE}" in shown, "told in C1"
    assert "call me Ada" in shown, "told here: already in this place's traces"
    assert "we deploy on Thursdays" in shown, "the channel's own"
    for never in ("salary", "let go", "Bob's own", "m00000004", "m00000005", "m00000006"):
        assert never not in shown and never not in given, "not recalled here at all"

    trace = await run(bot, "and in my DM?", ada(DM))
    step = next(s for s in trace.steps if s.action == RECALL_MEMORIES)
    assert "my salary is 100k" in (step.observation or ""), "a private place: its own reader"
    model.assert_complete()


async def test_forget_in_a_channel_names_a_fact_told_elsewhere_by_id() -> None:
    store = InMemoryMemories()
    await kept(store, "m00000001", "I am interviewing at Acme", C1)
    model = ScriptedModel(
        ["Thought: gone\nAction: forget[interviewing]", "Thought: done\nAction: finish[ok]"]
    )
    trace = await run(agent(model, Memories(store)), "forget the interview", ada(C2))
    step = next(s for s in trace.steps if s.action == "forget")
    assert step.observation == f"Forgot m00000001 {HIDDEN_HERE}."
    assert await store.list(Holder.person("slack", "U1")) == []


async def test_a_full_holder_names_its_oldest_by_id_where_its_text_may_not_be_read() -> None:
    store = InMemoryMemories()
    await kept(store, "m00000001", "I am interviewing at Acme", C1)
    memories = Memories(store, MemorySettings(max_per_user=1))
    try:
        await memories.remember(ada(C2), "one more", "person")
    except MemoryRefused as refused:
        assert "Acme" not in str(refused) and "m00000001" in str(refused)
    else:
        raise AssertionError("kept past the limit")
    try:
        await memories.remember(ada(C1), "one more", "person")
    except MemoryRefused as refused:
        assert "Acme" in str(refused), "where it was told, it is quoted"


@given(
    told=st.sampled_from(PLACES),
    now=st.sampled_from(PLACES),
    scope=st.sampled_from(("person", "channel")),
)
def test_a_trace_line_shows_text_only_to_whom_the_rule_allows(
    told: Where, now: Where, scope: str
) -> None:
    """Over every pair of places: a line shows the text only where the memory is recalled
    (the caller keeps to ``recallable``) and then only in a private place, for a channel's
    memory, or where the fact was told."""
    memory = Memory("m0000000a", "SECRET-TEXT", scope, "U1", told, 1.7e9)  # type: ignore[arg-type]
    here = ada(now)
    line = trace_line(memory, here)
    if "SECRET-TEXT" in line:
        assert now.private or scope == "channel" or told.place == now.place
        assert shown_here(memory, here)
    else:
        assert scope == "person" and not now.private and told.place != now.place
    if recallable(memory, here) and not now.private and scope == "person":
        assert ("SECRET-TEXT" in line) == (told.place == now.place)
