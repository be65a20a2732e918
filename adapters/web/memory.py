"""The web chat's memory routes: ``GET /api/memory`` (the session's memories, as data for
a panel) and ``POST /api/memory/forget`` (``{"id": ...}``), through the shared handler
(``adapters.dispatch.memory``). A web session is its own private place: what it lists is
what its runs recall. Texts go out as JSON strings, never as markup: a page shows them as
text (``textContent``)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from aiohttp import web

from adapters import words
from adapters.dispatch import memory
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, MemoryAction, Where
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


def intent_of(session: _Session, action: MemoryAction, ident: str = "") -> MemoryIntent:
    return MemoryIntent(
        event=f"web:{session.id}:memory:{time.monotonic_ns()}",
        actor=Actor("web", session.id, session.conversation, "you (web chat)"),
        where=Where("web", "session", session.id, name="web chat"),
        place=MemoryPlace("web", "", session.conversation, private=True),
        action=action,
        id=ident,
    )


class MemoryRoutes:
    def __init__(self, chat: _Chat) -> None:
        self.chat = chat

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
        return self.chat._json({"enabled": True, "memories": shown})

    async def forget(self, request: web.Request) -> web.Response:
        session, body = await self.chat._post(request)
        ident = str(body.get("id", ""))
        memories = self.chat.answering.agent.memories
        text = await memory.memory_reply(
            intent_of(session, "forget", ident), memories, escape=str, room=2000
        )
        return self.chat._json({"ok": text == words.memory_forgotten(ident), "text": text})
