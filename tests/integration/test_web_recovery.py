"""The web chat's half of crash recovery, over real HTTP: an answer a dead process left (its
record in the run registry, naming the asker's session, its heartbeat long stopped) is
finished by the live process: the session's page is told it was interrupted, with Retry;
a reload draws the same from the stored trace. Retry asks the question again once, only
from the session that asked; a Retry refused for room gives the run back."""

from __future__ import annotations

import time
from typing import Any

import aiohttp

from adapters import words
from adapters.recovery import INTERRUPTED
from adapters.room import BUSY, Room
from adapters.web.chat import COOKIE
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace, TraceStep
from tests.integration.test_web_chat import Chat, Events, _csrf, events, make

__all__ = ["events", "make"]  # the fixtures, shared with test_web_chat

ANSWER = Turn("Thought: easy.\nFinal Answer: all is well")


async def _left_by_a_dead_process(c: Chat, question: str = "what is up?") -> str:
    """The dead process's record of an answer in ``c``'s session, one step written."""
    cookie = next(m.value for m in c.http.cookie_jar if m.key == COOKIE)
    session = c.chat.sessions.from_cookie(cookie)
    assert session is not None
    trace = Trace(question=question, conversation=session.conversation, id="deadrun")
    trace.steps.append(TraceStep(index=1, thought="Looking it up", started_at=time.time()))
    record = RunRecord(
        "deadrun", "web", session.conversation, "dead", {"session": session.id},
        trace=trace.to_json(),
    )  # fmt: skip
    await c.chat.stores.runs.beat([record], at=time.time() - 600)  # silent for ten minutes
    return session.conversation


async def test_a_dead_processs_answer_ends_interrupted_with_retry_and_so_after_a_reload(
    make: Any, events: Any
) -> None:
    c: Chat = await make([ANSWER], run_lease=1.0)
    stream: Events = await events(c)
    conversation = await _left_by_a_dead_process(c)
    final = await stream.until(lambda d: d.get("run") == "deadrun" and d.get("final") is True)
    assert final["outcome"] == INTERRUPTED and final["retry"] == "deadrun"
    assert final["question"]["text"] == "what is up?"
    assert final["steps"][0]["thought"]["text"] == "Looking it up", "what the record kept"
    stored = await c.chat.stores.traces.get("deadrun")
    assert stored is not None and stored.status == "interrupted"
    assert not await c.chat.stores.runs.running("web", "deadrun")
    (turn,) = await c.history()  # a reload: the same state, Retry and all
    assert turn["outcome"] == INTERRUPTED and turn["retry"] == "deadrun"
    assert await c.chat.stores.history.load(conversation)

    assert await c.post("/api/retry", {"run": "deadrun"}) == (202, {"ok": True})
    answered = await stream.until(lambda d: d.get("final") is True and d.get("run") != "deadrun")
    assert answered["answer"]["text"] == "all is well"
    assert "what is up?" in str(c.model.calls[0].messages[-1]["content"])
    status, body = await c.post("/api/retry", {"run": "deadrun"})
    assert (status, body["error"]) == (409, words.RETRY_DONE)
    await c.chat.answering.settled()
    c.model.assert_complete()
    interrupted, again = await c.history()  # the same question twice: each its own trace
    assert interrupted["outcome"] == INTERRUPTED and interrupted["retry"] == "deadrun"
    assert again["answer"]["text"] == "all is well" and "retry" not in again


async def test_retry_from_another_session_or_of_an_unknown_run_asks_nothing(
    make: Any, events: Any
) -> None:
    c: Chat = await make([], run_lease=1.0)
    stream: Events = await events(c)
    await _left_by_a_dead_process(c)
    await stream.until(lambda d: d.get("run") == "deadrun" and d.get("final") is True)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
        async with other.get(c.url + "/") as page:
            token = _csrf(await page.text())
        async with other.post(
            c.url + "/api/retry",
            json={"run": "deadrun"},
            headers={"X-CSRF-Token": token, "Origin": c.url},
        ) as refused:
            assert (refused.status, (await refused.json())["error"]) == (409, words.RETRY_GONE)
    status, body = await c.post("/api/retry", {"run": "nosuchrun"})
    assert (status, body["error"]) == (409, words.RETRY_GONE)
    assert c.model.calls == []
    assert await c.chat.stores.claims.claim("retry:deadrun"), "no refused press took the run"


async def test_a_retry_refused_for_room_gives_the_run_back(make: Any, events: Any) -> None:
    slow = Turn("Thought: this takes a long while", chunk_size=4, stall_after=3)
    c: Chat = await make([slow, ANSWER], run_lease=1.0, room=Room(1))
    stream: Events = await events(c)
    await _left_by_a_dead_process(c)
    await stream.until(lambda d: d.get("run") == "deadrun" and d.get("final") is True)
    assert (await c.ask("a slow one"))[0] == 202
    live = await stream.until(lambda d: d.get("phase") == "thinking" and d.get("steps"))
    status, body = await c.post("/api/retry", {"run": "deadrun"})
    assert (status, body["error"]) == (429, BUSY)
    assert await c.post("/api/stop", {"run": live["run"]}) == (200, {"ok": True})
    await stream.until(lambda d: d.get("run") == live["run"] and d.get("final") is True)
    await c.chat.answering.settled()
    assert await c.post("/api/retry", {"run": "deadrun"}) == (202, {"ok": True})
    answered = await stream.until(
        lambda d: d.get("final") is True and d.get("answer", {}).get("text") == "all is well"
    )
    assert answered["run"] not in ("deadrun", live["run"])
    c.model.assert_complete()
