"""The web chat's commands, each a translation into its intent for the shared handlers
(``adapters.dispatch.commands``): ``POST /api/settings``, ``/api/verbosity`` (the page's
picker, the same route), ``/api/usage``, ``/api/reset``, ``/api/trace`` and ``/api/vote``
(``{"run": ID, "vote": "up"|"down"}``). ``/api/settings`` takes one of::

    {}                                    the settings shown
    {"verbosity": LEVEL|"default"}        what the session sees
    {"model": NAME|"default"}             its model; "" lists the catalogue
    {"persona": TEXT}                     its persona; "" clears it
    {"tool": NAME}                        a tool on <-> off; "" lists them
    {"show": "models"|"persona"|"tools"}  one of them shown
    {"edit": "persona"}                   the persona as it is, to edit: ``{"form": TEXT}``

Each answers ``{"said": TEXT}`` (and ``/api/trace`` the trace, as its Markdown and its
link), or ``{"error": TEXT, "reason": …}`` with a 4xx status when refused. Texts are JSON
strings: the page shows them as text (``textContent``), never as markup. A web session is
its own place: its person is the only one there, and so may change its settings.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any, Literal, Protocol

from aiohttp import web

from adapters import words
from adapters.dispatch.commands import Commands
from adapters.dispatch.intents import (
    Actor,
    Command,
    EditPersona,
    Reset,
    SetModel,
    SetPersona,
    Settings,
    SettingsChange,
    SetVerbosity,
    ShowModels,
    ShowPersona,
    ShowSettings,
    ShowTools,
    ShowTrace,
    ToggleTool,
    Usage,
    Vote,
    Where,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.live import VERBOSITIES, Verbosity
from adapters.web.refusals import refused

TRACE_CHARS = 60_000
"""Characters of a trace's Markdown sent to the page (the link holds the whole)."""


class _Session(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def conversation(self) -> str: ...

    def forget_live(self) -> None: ...


class _Chat(Protocol):
    @property
    def commands(self) -> Commands: ...

    @property
    def trace_link(self) -> Callable[[str], str | None] | None: ...

    async def _post(self, request: web.Request) -> tuple[Any, dict[str, Any]]: ...

    def _json(self, data: dict[str, Any], status: int = 200) -> web.Response: ...


def plain(text: str) -> str:
    """The shared words as the page shows them: text, without Markdown's emphasis."""
    return text.replace("**", "")


def actor_of(session: _Session) -> Actor:
    return Actor("web", session.id, session.conversation, "you (web chat)")


def where_of(session: _Session) -> Where:
    return Where("web", "session", session.id, name="web chat")


class CommandRoutes:
    def __init__(self, chat: _Chat) -> None:
        self.chat = chat

    def add_routes(self, app: web.Application) -> None:
        for path, route in (
            ("/api/settings", self.settings),
            ("/api/verbosity", self.settings),
            ("/api/usage", self.usage),
            ("/api/reset", self.reset),
            ("/api/trace", self.trace),
            ("/api/vote", self.vote),
        ):
            app.router.add_post(path, route)

    async def settings(self, request: web.Request) -> web.Response:
        session, body = await self.chat._post(request)
        if "verbosity" in body:
            chosen = str(body["verbosity"])
            if chosen not in (*VERBOSITIES, "default"):
                problem = {"error": words.VERBOSITY_CHOICES, "reason": "question"}
                return self.chat._json(problem, 400)
            level: Verbosity | None = None if chosen == "default" else chosen  # type: ignore[assignment]
            return await self._said(session, Settings, change=SetVerbosity(level))
        return await self._said(session, Settings, change=change_of(body))

    async def usage(self, request: web.Request) -> web.Response:
        session, _ = await self.chat._post(request)
        return await self._said(session, Usage)

    async def reset(self, request: web.Request) -> web.Response:
        session, _ = await self.chat._post(request)
        response = await self._said(session, Reset)
        if response.status == 200:
            session.forget_live()  # its running messages' latest states go with it
        return response

    async def trace(self, request: web.Request) -> web.Response:
        session, _ = await self.chat._post(request)
        outcome = await self._dispatch(session, ShowTrace)
        if not isinstance(outcome, Said) or outcome.trace is None:
            return self._answer(outcome)
        found = outcome.trace
        link = self.chat.trace_link(found.id) if self.chat.trace_link else None
        shown = {"id": found.id, "markdown": found.to_markdown()[:TRACE_CHARS], "link": link}
        return self.chat._json({"said": plain(outcome.text), "trace": shown})

    async def vote(self, request: web.Request) -> web.Response:
        session, body = await self.chat._post(request)
        value, run = str(body.get("vote", "")), str(body.get("run", ""))
        if value not in ("up", "down") or not run:
            return self.chat._json({"error": words.NOT_A_VOTE, "reason": "question"}, 400)
        chosen: Literal["up", "down"] = "up" if value == "up" else "down"
        return await self._said(session, Vote, run_id=run[:64], value=chosen)

    async def _said(self, session: _Session, kind: type[Command], **given: Any) -> web.Response:
        return self._answer(await self._dispatch(session, kind, **given))

    async def _dispatch(
        self, session: _Session, kind: type[Command], **given: Any
    ) -> Refusal | Drop | Said:
        event = f"web:{session.id}:{kind.__name__.lower()}:{secrets.token_hex(8)}"
        intent = kind(event=event, actor=actor_of(session), where=where_of(session), **given)
        return await self.chat.commands.dispatch(intent)

    def _answer(self, outcome: Refusal | Drop | Said) -> web.Response:
        if isinstance(outcome, Refusal):
            return self.chat._json(*refused(outcome))
        if isinstance(outcome, Drop):
            return self.chat._json({"ok": True, "dropped": outcome.reason}, 202)
        if outcome.failed:  # nothing changed: said, and marked so
            return self.chat._json({"said": plain(outcome.text), "failed": True})
        if outcome.form is not None:  # the persona to edit, as text (never markup)
            return self.chat._json({"said": "", "form": outcome.form})
        return self.chat._json({"said": plain(outcome.text)})


def change_of(body: dict[str, Any]) -> SettingsChange:
    """The settings change a ``/api/settings`` body asks for (the module's table)."""
    if "model" in body:
        name = _text(body["model"])
        return SetModel(name) if name.strip() else ShowModels()
    if "persona" in body:
        return SetPersona(_text(body["persona"]))
    if "tool" in body:
        name = _text(body["tool"])
        return ToggleTool(name) if name.strip() else ShowTools()
    if body.get("edit") == "persona":
        return EditPersona()
    shown = body.get("show")
    if shown == "models":
        return ShowModels()
    if shown == "persona":
        return ShowPersona()
    if shown == "tools":
        return ShowTools()
    return ShowSettings()


def _text(value: object) -> str:
    """A field as text (a number or null too: what the page sent, never an error)."""
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)
