"""The web chat's Memory panel and its routes: ``GET /api/memory`` (the session's memories,
as data for the panel), ``POST /api/memory/forget`` (``{"id": ...}``) and ``POST
/api/memory/clear`` (every memory the session's runs recall: its own and its place's),
through the shared handler (``adapters.dispatch.memory``), behind the chat's session and
CSRF checks (``_session``, ``_post``). A web session is its own private place: what it lists
is what its runs recall, and its owner is its place's only admin. Texts go out as JSON
strings, never as markup: the panel (``static/memory.js``) sets them as text
(``textContent``), so a remembered tag or link is shown, never followed."""

from __future__ import annotations

import time
from importlib import resources
from typing import Any, Protocol

from aiohttp import web

from adapters import words
from adapters.dispatch import memory
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, MemoryAction, MemoryScope, Where
from adapters.dispatch.intents import Memory as MemoryIntent
from core.errors import StoreUnavailable
from core.memories import Where as MemoryPlace


class _Session(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def conversation(self) -> str: ...


class _Chat(Protocol):
    @property
    def answering(self) -> Answering[Any]: ...

    def _session(self, request: web.Request) -> Any: ...

    async def _post(self, request: web.Request) -> tuple[Any, dict[str, Any]]: ...

    def _json(self, data: dict[str, Any], status: int = 200) -> web.Response: ...


def _asset(name: str) -> str:
    return resources.files("adapters.web").joinpath("static", name).read_text(encoding="utf-8")


def assets() -> dict[str, tuple[str, str]]:
    """The panel's script and style, served beside the chat's own (``/static/NAME``)."""
    return {
        "memory.js": (_asset("memory.js"), "text/javascript"),
        "memory.css": (_asset("memory.css"), "text/css"),
    }


def intent_of(
    session: _Session, action: MemoryAction, ident: str = "", scope: MemoryScope = "me"
) -> MemoryIntent:
    return MemoryIntent(
        event=f"web:{session.id}:memory:{time.monotonic_ns()}",
        actor=Actor("web", session.id, session.conversation, "you (web chat)"),
        where=Where("web", "session", session.id, name="web chat"),
        place=MemoryPlace("web", "", session.conversation, private=True),
        action=action,
        id=ident,
        scope=scope,
    )


class MemoryRoutes:
    def __init__(self, chat: _Chat) -> None:
        self.chat = chat

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/api/memory", self.listed)
        app.router.add_post("/api/memory/forget", self.forget)
        app.router.add_post("/api/memory/clear", self.clear)

    async def listed(self, request: web.Request) -> web.Response:
        session = self.chat._session(request)
        memories = self.chat.answering.agent.memories
        if memories is None:
            return self.chat._json({"enabled": False, "text": words.MEMORY_OFF})
        try:
            found = await memory.visible(intent_of(session, "list"), memories)
        except StoreUnavailable:
            return self.chat._json({"error": words.MEMORY_UNREADABLE}, 503)
        shown = [
            {"id": m.id, "text": m.text, "scope": words.memory_scope(m.scope), "at": m.at}
            for m in found
        ]
        said = words.memory_header(len(found)) if found else words.MEMORY_NONE
        return self.chat._json({"enabled": True, "memories": shown, "text": said})

    async def forget(self, request: web.Request) -> web.Response:
        session, body = await self.chat._post(request)
        ident = str(body.get("id", ""))
        memories = self.chat.answering.agent.memories
        text = await memory.memory_reply(
            intent_of(session, "forget", ident), memories, escape=str, room=2000
        )
        return self.chat._json({"ok": text == words.memory_forgotten(ident), "text": text})

    async def clear(self, request: web.Request) -> web.Response:
        """Every memory the session's runs recall: its own, then its place's (the session
        is its place's admin); how many, in the shared words."""
        session, _ = await self.chat._post(request)
        memories = self.chat.answering.agent.memories
        if memories is None:
            return self.chat._json({"ok": False, "text": words.MEMORY_OFF})
        try:
            mine = await memory.cleared(intent_of(session, "clear"), memories)
            ours = await memory.cleared(intent_of(session, "clear", scope="channel"), memories)
        except StoreUnavailable:
            return self.chat._json({"error": words.MEMORY_UNREADABLE}, 503)
        count = (mine or 0) + (ours or 0)
        return self.chat._json({"ok": True, "text": words.memory_cleared(count, "me")})
