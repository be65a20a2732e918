"""The web chat's memory routes through real HTTP: a session lists the memories its runs
recall, as data, and forgets one by id; another session cannot; the next run no longer
recalls it."""

from __future__ import annotations

from typing import Any

import aiohttp
from yarl import URL

from adapters import words
from adapters.web.chat import COOKIE
from core.memories import Asking, Holder, InMemoryMemories, Memories, MemorySettings, Where
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


def kept_by(c: Chat, place: Where | None = None) -> str:
    """The person id of the session this test opened (of the one at ``place``)."""
    found = [s for s in c.chat.sessions.all() if place is None or s.conversation == place.place]
    (session,) = found
    return str(session.id)


async def a_second_session(c: Chat) -> Chat:
    """Another visitor of the same chat: its own cookie, its own CSRF token."""
    from tests.integration.test_web_chat import _csrf

    http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    async with http.get(c.url + "/") as page:
        assert page.status == 200
        csrf = _csrf(await page.text())
    return Chat(c.chat, c.url, http, csrf, c.model, c.ran)


def session_of(c: Chat, chat: Chat) -> Where:
    """The memory place of the session ``chat``'s cookie holds (a web session is its own)."""
    cookie = chat.http.cookie_jar.filter_cookies(URL(c.url)).get(COOKIE)
    assert cookie is not None
    session = c.chat.sessions.from_cookie(cookie.value)
    assert session is not None
    return Where("web", "", session.conversation, private=True)


async def test_the_panel_clears_and_forgets_only_its_own_session(make: Any) -> None:  # noqa: F811
    """``POST /api/memory/clear`` deletes every memory the session's runs recall (its own
    and its place's), needs the page's CSRF token and origin, and leaves another session's
    memories alone; another session cannot forget this one's by id."""
    c: Chat = await make([])
    memories = Memories(InMemoryMemories(), MemorySettings(channel_writers="admins"))
    c.chat.answering.agent.memories = memories
    other = await a_second_session(c)
    try:
        mine = session_of(c, c)
        theirs = session_of(c, other)
        me = Asking(kept_by(c, mine), "you", False, mine)
        them = Asking(kept_by(c, theirs), "you", False, theirs)
        kept = await memories.remember(me, HOSTILE, "person")
        await memories.remember(me, "we deploy on Thursdays", "channel")
        their = await memories.remember(them, "their own fact", "person")

        shown = await listed(c)
        assert [m["text"] for m in shown["memories"]] == ["we deploy on Thursdays", HOSTILE]
        assert [m["scope"] for m in shown["memories"]] == ["this channel's", "yours"]
        assert shown["text"] == words.memory_header(2)
        assert [m["id"] for m in (await listed(other))["memories"]] == [their.id]

        status, body = await other.post("/api/memory/forget", {"id": kept.id})
        assert (status, body["ok"]) == (200, False), "another session's id is not found"
        forged = await c.post("/api/memory/clear", {}, **{"X-CSRF-Token": other.csrf})
        assert forged[0] == 403, "another session's token does not clear this one"
        async with c.http.post(c.url + "/api/memory/clear", json={}) as response:
            assert response.status == 403, "no token, no origin: refused"
        assert len((await listed(c))["memories"]) == 2

        assert await c.post("/api/memory/clear", {}) == (
            200,
            {"ok": True, "text": words.memory_cleared(2, "me")},
        )
        assert (await listed(c)) == {"enabled": True, "memories": [], "text": words.MEMORY_NONE}
        assert [m["id"] for m in (await listed(other))["memories"]] == [their.id]
    finally:
        await other.http.close()


async def test_the_page_serves_the_panel_under_its_content_policy(make: Any) -> None:  # noqa: F811
    c: Chat = await make([])
    async with c.http.get(c.url + "/") as page:
        html = await page.text()
        policy = page.headers["Content-Security-Policy"]
    assert 'src="/static/memory.js"' in html and 'href="/static/memory.css"' in html
    assert 'id="memory"' in html and "script-src 'self'" in policy
    async with c.http.get(c.url + "/static/memory.js") as script:
        assert script.status == 200 and script.content_type == "text/javascript"
        source = await script.text()
    assert "innerHTML" not in source and "insertAdjacentHTML" not in source
    assert "X-CSRF-Token" in source
