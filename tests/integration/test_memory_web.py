"""The web chat's memory routes through real HTTP: a session lists the memories its runs
recall, as data, and forgets one by id; another session cannot; the next run no longer
recalls it."""

from __future__ import annotations

from typing import Any

from adapters import words
from core.memories import Holder, InMemoryMemories, Memories
from tests.integration.test_web_chat import Chat, make  # noqa: F401
from tests.memories import recalled

HOSTILE = "<img src=x onerror=alert(1)> @everyone"


async def listed(c: Chat) -> dict[str, Any]:
    async with c.http.get(c.url + "/api/memory") as response:
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        return body


async def test_a_session_lists_and_forgets_its_memories_and_the_next_run_forgets(
    make: Any,  # noqa: F811
) -> None:
    c: Chat = await make(
        [
            f'Thought: keep it\nAction: remember[{{"fact": "{HOSTILE}"}}]',
            "Thought: kept\nAction: finish[Noted.]",
            "Thought: ok\nAction: finish[ok]",
        ]
    )
    c.chat.answering.agent.memories = None
    assert await listed(c) == {"enabled": False, "text": words.MEMORY_OFF}
    memories = Memories(InMemoryMemories())
    c.chat.answering.agent.memories = memories
    assert (await c.ask("remember this"))[0] == 202
    await c.chat.answering.settled()
    (kept,) = await memories.store.list(Holder.person("web", kept_by(c)))
    assert kept.text == HOSTILE
    shown = await listed(c)
    assert shown["memories"] == [{"id": kept.id, "text": HOSTILE, "scope": "yours", "at": kept.at}]
    assert await c.post("/api/memory/forget", {"id": "m00000000"}) == (
        200,
        {"ok": False, "text": words.memory_not_found("“m00000000”")},
    )
    assert await c.post("/api/memory/forget", {"id": kept.id}) == (
        200,
        {"ok": True, "text": words.memory_forgotten(kept.id)},
    )
    assert (await listed(c))["memories"] == []
    assert (await c.ask("what do you know?"))[0] == 202
    await c.chat.answering.settled()
    assert recalled(c.model, 2) == "", "the next run no longer recalls it"
    c.model.assert_complete()


def kept_by(c: Chat) -> str:
    (session,) = c.chat.sessions.all()  # the one session this test opened
    return str(session.id)
