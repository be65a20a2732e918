"""The web chat's presses on a run: ``POST /api/stop`` (``{"run"}``), ``POST /api/decide``
(``{"run", "step", "call", "verdict", "input"?, "reason"?}``) and ``POST /api/retry``
(``{"run", "id"?}``), and the last state of an answer whose process died (crash recovery's
``Finalise``: the page's message says interrupted, with Retry).

A web session is the person and the place: a run's message, and its buttons, are shown
only to the session that asked, so a press names its run and the session is checked
against the run's own record (``adapters.decisions``). Every refusal is the shared words'
(``adapters.words``), sent as ``{"error": …}`` for the page to show.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from adapters.dispatch.checks import Admitted, Ticket
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.intents import Actor, Ask, Decide, Retry, Stop, Where
from adapters.dispatch.outcome import Done, Outcome, Refusal
from adapters.live import RunView
from adapters.policy import Policy
from adapters.web.refusals import refused
from adapters.web.render import WebPayload, WebRenderer, clean
from core.approval import ApprovalBroker
from core.stores import RunRecord, Stores
from core.trace import Trace

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from adapters.dispatch.dispatcher import Dispatcher

VERDICTS = ("approve", "edit", "deny", "always")
INPUT_CHARS = 4_000
REASON_CHARS = 500


class _Session(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def conversation(self) -> str: ...

    def publish(self, key: str, body: str, *, final: bool = False) -> None: ...


class _Sessions(Protocol):
    def get(self, sid: str) -> Any: ...


class _Chat(Protocol):
    """What these routes need of ``WebChat``."""

    @property
    def answering(self) -> Answering[Any]: ...
    @property
    def dispatcher(self) -> Dispatcher[Any]: ...
    @property
    def broker(self) -> ApprovalBroker | None: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def stores(self) -> Stores: ...
    @property
    def sessions(self) -> _Sessions: ...
    @property
    def trace_link(self) -> Callable[[str], str | None] | None: ...

    async def _post(self, request: web.Request) -> tuple[Any, dict[str, Any]]: ...
    def _json(self, data: dict[str, Any], status: int = 200) -> web.Response: ...
    def ask_of(self, session: Any, question: str, *, event: str) -> Ask[Any]: ...
    def reply(self, admitted: Admitted[Any]) -> Reply: ...
    def _answer(self, ticket: Ticket[Any], reply: Reply) -> Coroutine[Any, Any, None]: ...


def _pressed(session: _Session) -> dict[str, Any]:
    """Who pressed and where, for a ``Stop`` or ``Decide``: the session is the person and
    the place (a run's message is shown only to the session that asked)."""
    return {
        "event": f"web:{session.id}:press:{time.monotonic_ns()}",
        "actor": Actor("web", session.id, session.conversation, "you"),
        "where": Where("web", "session", session.id, name="web chat"),
        "at": {"session": session.id},
    }


def _refused(chat: _Chat, refusal: Refusal) -> web.Response:
    return chat._json(*refused(refusal))


class RunRoutes:
    def __init__(self, chat: _Chat) -> None:
        self.chat = chat

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/api/stop", self.stop)
        app.router.add_post("/api/decide", self.decide)
        app.router.add_post("/api/retry", self.retry)

    async def stop(self, request: web.Request) -> web.Response:
        chat = self.chat
        session, body = await chat._post(request)
        stop = Stop(run_id=str(body.get("run", ""))[:100], **_pressed(session))
        return self._said(await chat.dispatcher.stop(stop))

    async def decide(self, request: web.Request) -> web.Response:
        chat = self.chat
        session, body = await chat._post(request)
        try:
            run_id, step, call = str(body["run"])[:100], int(body["step"]), int(body["call"])
            verdict = str(body["verdict"])
        except (KeyError, TypeError, ValueError):
            return chat._json({"error": "A decision names its run, step, call and verdict."}, 400)
        if verdict not in VERDICTS:
            return chat._json({"error": "The verdict is approve, edit, deny or always."}, 400)
        decide = Decide(
            run_id=run_id,
            step=step,
            call=call,
            verdict=verdict,  # type: ignore[arg-type]  # one of VERDICTS
            input=str(body.get("input", ""))[:INPUT_CHARS] if verdict == "edit" else None,
            reason=str(body.get("reason", ""))[:REASON_CHARS],
            **_pressed(session),
        )
        return self._said(await chat.dispatcher.decide(decide))

    def _said(self, outcome: Outcome) -> web.Response:
        if isinstance(outcome, Refusal):
            return _refused(self.chat, outcome)
        return self.chat._json({"ok": True})

    async def retry(self, request: web.Request) -> web.Response:
        """The interrupted run's question asked again in its session, once however often
        Retry is pressed (``Dispatcher.retry``)."""
        chat = self.chat
        session, body = await chat._post(request)
        pressed = _pressed(session)
        del pressed["at"]  # Retry reads the trace's conversation, not a run's record
        retry = Retry(run_id=str(body.get("run", ""))[:100], places=(session.conversation,),
                      **pressed)  # fmt: skip
        outcome = await chat.dispatcher.retry(
            retry,
            lambda question: chat.ask_of(session, question, event=retry.event),
            chat.reply,
            answer=chat._answer,
        )
        if isinstance(outcome, Refusal):
            return _refused(chat, outcome)
        return chat._json({"ok": True}, status=202 if isinstance(outcome, Done) else 200)

    async def finish_orphan(self, record: RunRecord, trace: Trace, text: str) -> None:
        """The last state of an answer whose process died, sent to its session's pages: the
        steps its record kept, the words, and Retry (when its question is known). A page
        opened later draws the same from the stored trace (``/api/history``)."""
        chat = self.chat
        sid = record.where.get("session", "")
        session = chat.sessions.get(sid) if sid else None
        if session is None:
            return
        verbosity = await chat.answering.choices.verbosity(session.conversation)
        view = RunView.of_trace(trace, verbosity=verbosity or chat.policy.verbosity)
        renderer = WebRenderer(record.run_id, clock=time.monotonic, trace_link=chat.trace_link)
        data = renderer.final(view).data()
        data["outcome"] = clean(text, 600)["text"]
        session.publish(record.run_id, WebPayload.of(data).body, final=True)
