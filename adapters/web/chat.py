"""The web chat: a page on the bot's own HTTP server, one conversation per browser session,
the answer's message updated live over Server-Sent Events.

::

    GET  /                 the page (or the sign-in form when a token is required)
    POST /signin           the token, once; sets the session cookie
    GET  /static/{file}    the page's script and stylesheet (the only ones the policy allows)
    GET  /api/history      the conversation's earlier turns (after a reload)
    GET  /api/events       Server-Sent Events: each message's state, as JSON, latest wins
    POST /api/ask          {"question"}, or a form with files too (``adapters.web.uploads``);
                           202, or the refusal's words with 4xx
    POST /api/stop         {"run"}                        (``adapters.web.runs``)
    POST /api/decide       {"run", "step", "call", "verdict", "input"?, "reason"?}
    POST /api/retry        {"run"}: an interrupted answer's question, asked again once
    POST /api/settings     {"verbosity"?}; /api/verbosity, /api/usage, /api/reset, /api/trace,
                           /api/vote {"run", "vote"}: the shared commands (``adapters.web.commands``)

A question goes through the same ``Answering`` as on Discord and Slack (access, bounds,
budgets, cooldown, runs per person, approvals); this module only translates HTTP into an
``Ask`` and is the ``Reply`` and ``Surface`` of its answer.

Security: every request must name a host the chat answers (``adapters.web.hosts``: loopback,
``web.public_url``'s, ``web.allowed_hosts``; else 421, before any session exists: DNS
rebinding). The session is an HttpOnly, SameSite=Strict cookie (Secure behind TLS) holding a
random id and its HMAC; every POST carries a CSRF token (an HMAC of the session) in a header
and must come from one of those origins. Without a token (``REACTBOT_WEB_TOKEN``) the chat
is only for loopback addresses; with one, people sign in once with it (``SIGNIN_TRIES``
wrong tokens per client address a minute, ``SIGNIN_TRIES_ALL`` from all, then 429). The page's policy
allows scripts and styles from this origin only, no inline script or handler, and connects
nowhere else. Everything is bounded: the question, the request body, the SSE streams per
session (``MAX_STREAMS``: the newest ends the oldest), sessions kept in memory
(``MAX_SESSIONS``; one with an open stream or a run is never the one forgotten), new
sessions per client address a minute (``web.max_sessions_per_address``), and an idle stream
is closed after ``IDLE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from html import escape as escape_html
from importlib import resources
from typing import Any

from aiohttp import web

from adapters import words
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted, Ticket
from adapters.dispatch.commands import Commands
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import Actor, Ask, Where
from adapters.dispatch.outcome import Drop, Outcome, Refusal
from adapters.live import LiveMessage, RunView, Verbosity
from adapters.pacing import EditPacer
from adapters.policy import Policy
from adapters.room import Room
from adapters.web.commands import CommandRoutes
from adapters.web.guard import (
    WindowLimit,
    client_key,
    host_middleware,
    host_refusal,
    too_many,
)
from adapters.web.hosts import HostRule, is_loopback
from adapters.web.memory import MemoryRoutes
from adapters.web.memory import assets as memory_assets
from adapters.web.refusals import refused
from adapters.web.render import WebPayload, WebRenderer, clean
from adapters.web.runs import RunRoutes
from adapters.web.uploads import Uploads
from core.agent import Agent, Run
from core.approval import ApprovalBroker
from core.budgets import TokenBudgets
from core.errors import ReactbotError
from core.memories import Where as MemoryPlace
from core.prompt import QUESTION_PREFIX
from core.stores import Stores
from core.trace import Trace

log = logging.getLogger(__name__)

COOKIE = "reactbot_session"
CSRF_HEADER = "X-CSRF-Token"
MAX_STREAMS = 4
"""Server-Sent Event streams one session may hold open (tabs): a newer one ends the oldest
(a closed tab is noticed only at the next write, so a refusal would lock out reloads)."""
MAX_SESSIONS = 10_000
"""Sessions whose live state this process keeps (the least recent that has no open stream
and no run is forgotten; its conversation stays in the history store)."""
SIGNIN_TRIES = 5
"""Wrong tokens one client address may have checked in a minute; then 429 until the oldest
is a minute old."""
SIGNIN_TRIES_ALL = 60
"""Wrong tokens checked in a minute from all addresses together: a guesser with many
addresses (one IPv6 machine has 2^64) still gets 86,400 guesses a day, nothing against a
token of 16 random bytes, while a team mistyping never comes near it. Reaching it delays
everyone's sign-in (not a signed-in session) for up to a minute."""
MINUTE = 60.0
IDLE_SECONDS = 300.0
"""A stream with nothing to say for this long is closed (the page reopens it when needed)."""
KEEPALIVE_SECONDS = 15.0
BODY_BYTES = 64 * 1024
EDIT_INTERVAL = 0.25
"""The live message is redrawn at most this often (a browser has no rate limit; this only
coalesces a burst of tokens into one frame)."""
HISTORY_TURNS = 50


@dataclass(frozen=True, slots=True)
class WebSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    """``REACTBOT_WEB_TOKEN``: required to serve on an address other than loopback."""
    secure_cookie: bool = False
    """Set ``Secure`` on the cookie (the chat is reached over https)."""
    idle_seconds: float = IDLE_SECONDS
    """A stream with nothing to say for this long, while none of its session's answers
    runs, is closed."""
    public_url: str | None = None
    """``web.public_url``: its host is answered besides loopback (``adapters.web.hosts``)."""
    allowed_hosts: tuple[str, ...] = ()
    """``web.allowed_hosts``: further names the chat answers (``name`` or ``name:port``)."""
    max_sessions_per_address: int = 20
    """New sessions one client address may open in a minute."""
    max_sessions: int = MAX_SESSIONS
    """Sessions kept in memory (``MAX_SESSIONS``; smaller in tests)."""


class WebChatRefused(ReactbotError):
    """The chat will not start as configured (a public address without a token)."""


# ---- sessions -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Stream:
    latest: dict[str, str] = field(default_factory=dict)
    """Each message's newest state not yet written (older ones are dropped: latest wins)."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    """Told to end: a newer tab took its place, or the server is shutting down."""

    def end(self) -> None:
        self.ended = True
        self.ready.set()


@dataclass(slots=True)
class Session:
    id: str
    streams: list[_Stream] = field(default_factory=list)
    live: OrderedDict[str, str] = field(default_factory=OrderedDict)
    """The latest state of each message still running, for a stream opened later (a page
    reloaded mid-run); finished ones are in the history the page loads."""
    running: int = 0
    """Answers admitted for this session and not yet ended."""

    @property
    def conversation(self) -> str:
        return f"web:{self.id}"

    def forget_live(self) -> None:
        """Reset: the latest states of its running messages go (a reloaded page shows none)."""
        self.live.clear()

    @property
    def busy(self) -> bool:
        """An open stream or an answer on its way: forgetting it would cut a person off."""
        return bool(self.streams or self.live or self.running)

    def publish(self, key: str, body: str, *, final: bool = False) -> None:
        if final:
            self.live.pop(key, None)
        else:
            self.live[key] = body
            self.live.move_to_end(key)
            while len(self.live) > MAX_STREAMS * 4:
                self.live.popitem(last=False)
        for stream in self.streams:
            stream.latest[key] = body
            stream.ready.set()


class Sessions:
    """Signed session ids and the live state of recent ones: at most ``capacity``, and at most
    ``per_address`` new ones from one client address a minute."""

    def __init__(
        self,
        key: bytes,
        *,
        capacity: int = MAX_SESSIONS,
        per_address: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._key = key
        self._live: OrderedDict[str, Session] = OrderedDict()
        self.capacity = capacity
        self.made = WindowLimit(per_address, MINUTE, clock=clock)

    def _sign(self, purpose: str, sid: str) -> str:
        return hmac.new(self._key, f"{purpose}\n{sid}".encode(), hashlib.sha256).hexdigest()

    def new_cookie(self, address: str) -> tuple[str, Session] | float | None:
        """A new session for a client at ``address``; the seconds it must wait when it made
        its minute's share already, or None when every session kept is busy."""
        wait = self.made.wait(address)
        if wait:
            return wait
        sid = secrets.token_urlsafe(18)
        session = self.get(sid)
        if session is None:
            return None
        if self.made.add(address):
            log.warning(
                "web chat: %d new sessions from %s within a minute; more wait",
                self.made.limit,
                address,
            )
        return f"{sid}.{self._sign('session', sid)}", session

    def from_cookie(self, value: str | None) -> Session | None:
        if not value or len(value) > 200 or "." not in value:
            return None
        sid, _, sig = value.partition(".")
        if not hmac.compare_digest(self._sign("session", sid), sig):
            return None
        return self.get(sid)

    def csrf(self, session: Session) -> str:
        return self._sign("csrf", session.id)

    def all(self) -> list[Session]:
        return list(self._live.values())

    def get(self, sid: str) -> Session | None:
        """The live state of ``sid``, made when new; None when it is new and no session
        kept may make room (each one busy)."""
        session = self._live.get(sid)
        if session is None:
            if len(self._live) >= self.capacity and not self._forget_one():
                return None
            session = self._live[sid] = Session(sid)
        self._live.move_to_end(sid)
        return session

    def _forget_one(self) -> bool:
        """Forget the least recent session that is not busy; a busy one met on the way is
        moved to the recent end (it is in use), so the next search starts past it."""
        for _ in range(len(self._live)):
            sid, oldest = next(iter(self._live.items()))
            if oldest.busy:
                self._live.move_to_end(sid)
                continue
            del self._live[sid]
            for stream in oldest.streams:  # none while not busy; never leave one orphaned
                stream.end()
            return True
        return False


# ---- the live message -----------------------------------------------------------------------


class WebSurface:
    """``adapters.live.Surface``: each edit is the message's new state, sent to every stream
    of its session."""

    def __init__(self, session: Session, run_id: str) -> None:
        self._session = session
        self._run_id = run_id

    @property
    def channel_key(self) -> str:
        return self._session.conversation

    async def edit(self, payload: WebPayload) -> None:
        self._session.publish(self._run_id, payload.body, final=payload.final)

    async def post_trace(self, trace: Trace, posts: Sequence[WebPayload]) -> None:
        """The trace is its page, linked from the final message: nothing to post."""
        del trace, posts


class WebReply:
    """``adapters.dispatch.handlers.ask.Reply`` of one question asked in the page."""

    def __init__(self, chat: WebChat, session: Session) -> None:
        self._chat = chat
        self._session = session

    async def open(self, verbosity: Verbosity) -> str | None:
        return self._session.conversation

    def where(self) -> dict[str, str]:
        return {"session": self._session.id}

    def reading(self) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def show(self, run: Run, view: RunView) -> LiveMessage[WebPayload]:
        run_id = run.trace.id
        renderer = WebRenderer(run_id, clock=time.monotonic, trace_link=self._chat.trace_link)
        surface = WebSurface(self._session, run_id)
        await surface.edit(renderer.live(view))  # the message appears at once, with Stop
        return LiveMessage(surface, renderer, self._chat.pacer, view=view, tick=1.0)

    async def note(self, text: str) -> None:
        key = f"note:{secrets.token_hex(4)}"
        note = WebPayload.of({"type": "note", "text": clean(text, 600)})
        self._session.publish(key, note.body, final=True)

    async def ended(self, run: Run) -> None:
        del run


# ---- the chat -------------------------------------------------------------------------------


class WebChat:
    """The routes of the chat, over one ``Answering``."""

    def __init__(
        self,
        agent: Agent,
        *,
        stores: Stores,
        budgets: TokenBudgets,
        choices: ChannelChoices,
        settings: WebSettings,
        policy: Policy,
        broker: ApprovalBroker | None = None,
        secret: bytes | None = None,
        trace_link: Callable[[str], str | None] | None = None,
        room: Room | None = None,
        files: ConversationFiles | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not is_loopback(settings.host) and not settings.token:
            raise WebChatRefused(
                f"the web chat would listen on {settings.host}, which is not a loopback "
                "address: set REACTBOT_WEB_TOKEN (people sign in once with it), or use "
                "web.host: 127.0.0.1"
            )
        self.settings = settings
        self.policy = policy
        """Cooldown, verbosity and the run's limits (``bot.policy``)."""
        self.stores = stores
        self.broker = broker
        self.trace_link = trace_link
        self.sessions = Sessions(
            secret or secrets.token_bytes(32),
            capacity=settings.max_sessions,
            per_address=settings.max_sessions_per_address,
            clock=clock,
        )
        self.hosts = HostRule.of(
            bind=settings.host, public_url=settings.public_url, allowed=settings.allowed_hosts
        )
        self.wrong_tokens = WindowLimit(SIGNIN_TRIES, MINUTE, clock=clock)
        self.wrong_tokens_all = WindowLimit(SIGNIN_TRIES_ALL, MINUTE, clock=clock, max_keys=1)
        self.pacer = EditPacer(EDIT_INTERVAL)
        self._closing = False
        self.runs = RunRoutes(self)
        """Stop, decide, Retry, and the last state of a dead process's answers."""
        self.answering: Answering[Session] = Answering(
            agent,
            surface="web",
            policy=policy,
            stores=stores,
            budgets=budgets,
            choices=choices,
            broker=broker,
            empty_question="Type a question first.",
            quote=lambda text: text,
            finalise=self.runs.finish_orphan,
            room=room,
            files=files,
        )
        self.dispatcher: Dispatcher[Session] = Dispatcher(
            self.answering, claims=stores.claims, traces=stores.traces
        )
        """Each question once (the page's id for it), bursts gathered (``adapters.dispatch``)."""
        self.commands = Commands(
            Services(policy, stores, budgets, choices, files), access=self.answering.access
        )
        """Settings, usage, reset, trace and votes (``adapters.web.commands``)."""
        self.files = files
        # The buttons' words are the shared ones (``words.BUTTONS``), read by the page's script.
        labels = escape_html(words.labels_json(), quote=True)
        self._page = _asset("chat.html").replace("{{labels}}", labels)
        self._static = {
            "chat.js": (_asset("chat.js"), "text/javascript"),
            "markdown.js": (_asset("markdown.js"), "text/javascript"),
            "chat.css": (_asset("chat.css"), "text/css"),
            **memory_assets(),
        }
        self.headers = {
            "Content-Security-Policy": (
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
            ),
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-store",
        }
        self.uploads = Uploads(files.limits if files else None, self.headers)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/", self.page)
        app.router.add_post("/signin", self.signin)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/favicon.ico", self.no_icon)
        app.router.add_get("/api/history", self.history)
        app.router.add_get("/api/events", self.events)
        app.router.add_post("/api/ask", self.ask)
        self.runs.add_to(app)
        CommandRoutes(self).add_routes(app)  # settings, usage, reset, trace, vote
        MemoryRoutes(self).add_routes(app)

    def application(self) -> web.Application:
        app = web.Application(client_max_size=BODY_BYTES, middlewares=[host_middleware(self.hosts)])
        self.add_routes(app)
        app.on_startup.append(lambda _: self.answering.start())
        app.on_shutdown.append(lambda _: self.aclose())
        return app

    async def aclose(self) -> None:
        """Every stream ends at once (the pages reconnect to the next process), then the
        running answers end as stopped."""
        self._closing = True
        for session in self.sessions.all():
            for stream in list(session.streams):
                stream.end()
        await self.answering.aclose(grace=5.0)

    # ---- pages ------------------------------------------------------------------------------
    async def page(self, request: web.Request) -> web.Response:
        session = self.sessions.from_cookie(request.cookies.get(COOKIE))
        cookie: str | None = None
        if session is None:
            if self.settings.token:
                return self._html(_asset("signin.html"))
            made = self._new_session(request)
            if isinstance(made, web.Response):
                return made
            cookie, session = made
        html = self._page.replace("{{csrf}}", self.sessions.csrf(session))
        shown = await self.answering.choices.verbosity(session.conversation)
        html = html.replace("{{verbosity}}", shown or self.policy.verbosity)
        response = self._html(html)
        if cookie is not None:
            self._set_cookie(request, response, cookie)
        return response

    async def signin(self, request: web.Request) -> web.Response:
        if not self._same_origin(request) or not self.settings.token:
            return web.Response(status=403, text="Not from this page.", headers=self.headers)
        form = await request.post()
        given = str(form.get("token", ""))
        address = client_key(request)
        # From the limits' check to the count, nothing awaits: requests in parallel cannot
        # all pass the check before the first wrong one is counted.
        wait = max(self.wrong_tokens.wait(address), self.wrong_tokens_all.wait("all"))
        if wait:
            return self._signin_page(
                f"Too many wrong tokens: try again in {math.ceil(wait)} seconds.",
                status=429,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        if not hmac.compare_digest(given.encode(), self.settings.token.encode()):
            self._count_wrong_token(address)
            await asyncio.sleep(0.5)  # a guess costs time
            return self._signin_page("That token is not right.", status=403)
        made = self._new_session(request)
        if isinstance(made, web.Response):
            return made
        cookie, _ = made
        response = web.Response(status=303, headers={**self.headers, "Location": "/"})
        self._set_cookie(request, response, cookie)
        return response

    def _count_wrong_token(self, address: str) -> None:
        if self.wrong_tokens.add(address):
            log.warning(
                "web chat sign-in: %d wrong tokens from %s within a minute; its next tries wait",
                SIGNIN_TRIES,
                address,
            )
        if self.wrong_tokens_all.add("all"):
            log.warning(
                "web chat sign-in: %d wrong tokens from all addresses within a minute; every "
                "sign-in waits until the oldest is a minute old",
                SIGNIN_TRIES_ALL,
            )

    def _new_session(self, request: web.Request) -> tuple[str, Session] | web.Response:
        made = self.sessions.new_cookie(client_key(request))
        if made is None:
            return web.Response(
                status=503,
                text="The chat is full right now: try again in a minute.",
                headers={**self.headers, "Retry-After": "60"},
            )
        if isinstance(made, float):
            return too_many(
                f"Too many new sessions from your address: try again in {math.ceil(made)} seconds.",
                made,
                self.headers,
            )
        return made

    def _signin_page(
        self, error: str, *, status: int, headers: dict[str, str] | None = None
    ) -> web.Response:
        page = _asset("signin.html").replace(
            "<!--error-->", f'<p class="error" role="alert">{error}</p>'
        )
        response = self._html(page, status=status)
        response.headers.update(headers or {})
        return response

    async def no_icon(self, request: web.Request) -> web.Response:
        """Browsers ask for it unprompted; no content, rather than a 404 in the console."""
        del request
        return web.Response(status=204, headers=self.headers)

    async def static(self, request: web.Request) -> web.Response:
        found = self._static.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        text, kind = found
        headers = {**self.headers, "Cache-Control": "no-cache"}
        return web.Response(text=text, content_type=kind, headers=headers)

    # ---- the API ----------------------------------------------------------------------------
    async def history(self, request: web.Request) -> web.Response:
        """The conversation so far, each finished answer drawn as its live message ended (steps,
        answer, sources, footer) from its trace; an answer whose trace is gone shows as text."""
        session = self._session(request)
        messages = await self.stores.history.load(session.conversation)
        traces: dict[str, list[Trace]] = {}  # by question, newest first
        for stored in await self.stores.traces.list(session.conversation):
            traces.setdefault(stored.question, []).append(stored)
        verbosity = await self.answering.choices.verbosity(session.conversation)
        asked: list[tuple[str, str]] = []
        question: str | None = None
        for message in messages[-2 * HISTORY_TURNS :]:
            if message["role"] == "user" and message["content"].startswith(QUESTION_PREFIX):
                question = message["content"].removeprefix(QUESTION_PREFIX)
            elif message["role"] == "assistant" and question is not None:
                asked.append((question, message["content"]))
                question = None
        # A question asked twice (Retry asks it again) has a trace each: the newest turn
        # takes the newest one.
        found = [_newest(traces, q) for q, _ in reversed(asked)][::-1]
        turns: list[dict[str, Any]] = []
        for (question, said), trace in zip(asked, found, strict=True):
            renderer = WebRenderer(
                f"earlier-{len(turns)}", clock=time.monotonic, trace_link=self.trace_link
            )
            if trace is not None and trace.status != "running":
                view = RunView.of_trace(trace, verbosity=verbosity or self.policy.verbosity)
                turns.append(renderer.final(view).data())
            else:
                turns.append(renderer.earlier(question, said).data())
        return self._json({"turns": turns})

    async def events(self, request: web.Request) -> web.StreamResponse:
        session = self._session(request)
        if self._closing:
            return self._json({"error": "The bot is restarting."}, status=503)
        while len(session.streams) >= MAX_STREAMS:  # the newest tab wins; the oldest ends
            session.streams.pop(0).end()
        stream = _Stream(latest=dict(session.live))
        if stream.latest:
            stream.ready.set()
        session.streams.append(stream)
        response = web.StreamResponse(
            headers={
                **self.headers,
                "Content-Type": "text/event-stream",
                "X-Accel-Buffering": "no",
            }
        )
        try:
            await response.prepare(request)
            await self._stream(response, stream, session)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            if stream in session.streams:
                session.streams.remove(stream)
        return response

    async def _stream(
        self, response: web.StreamResponse, stream: _Stream, session: Session
    ) -> None:
        idle = self.settings.idle_seconds
        idle_since = time.monotonic()
        await response.write(b"retry: 2000\n\n")
        while True:
            try:
                async with asyncio.timeout(min(KEEPALIVE_SECONDS, idle / 2)):
                    await stream.ready.wait()
            except TimeoutError:
                if not session.live and time.monotonic() - idle_since >= idle:
                    await response.write(b"event: bye\ndata: {}\n\n")
                    return
                await response.write(b": keepalive\n\n")
                continue
            if stream.ended:
                await response.write(b"event: bye\ndata: {}\n\n")
                return
            stream.ready.clear()
            pending, stream.latest = stream.latest, {}
            for body in pending.values():
                await response.write(f"data: {body}\n\n".encode())
            idle_since = time.monotonic()

    async def ask(self, request: web.Request) -> web.Response:
        session, body = await self._post(request)
        outcome = await self.asked(
            session,
            str(body.get("question", "")).strip(),
            event=f"web:{session.id}:{_client_id(body.get('id'))}",
            files=tuple(body.get("files", ())),  # a form's (``_post``)
        )
        if isinstance(outcome, Refusal):
            return self._json(*refused(outcome))
        if isinstance(outcome, Drop):  # a repeated POST, or a message added to the last one
            return self._json({"ok": True, "dropped": outcome.reason}, status=202)
        return self._json({"ok": True}, status=202)

    async def asked(
        self, session: Session, question: str, *, event: str, files: Sequence[Any] = ()
    ) -> Outcome:
        """``question`` typed in ``session`` (a burst within ``agent.merge_window``
        gathers)."""
        ask = self.ask_of(session, question, event=event, files=files)
        return await self.dispatcher.dispatch(ask, self.reply, answer=self._answer)

    def ask_of(
        self, session: Session, question: str, *, event: str, files: Sequence[Any] = ()
    ) -> Ask[Session]:
        """``question`` asked in ``session``, as the dispatcher reads it."""
        return Ask(
            event=event,
            actor=Actor("web", session.id, session.conversation, "you (web chat)"),
            where=Where("web", "session", session.id, name="web chat"),
            question=question,
            files=files,
            memories=MemoryPlace("web", "", session.conversation, private=True),  # its own
            who=session,
        )

    def reply(self, admitted: Admitted[Session]) -> WebReply:
        return WebReply(self, admitted.who)

    def _answer(self, ticket: Ticket[Session], reply: Reply) -> Coroutine[Any, Any, None]:
        session = ticket.ask.who
        session.running += 1  # from here to its end, the session is not forgotten
        return self._answered(ticket, reply, session)

    async def _answered(self, ticket: Ticket[Session], reply: Reply, session: Session) -> None:
        try:
            await self.answering.answer(ticket, reply)
        finally:
            session.running -= 1

    # ---- parts ------------------------------------------------------------------------------
    def _session(self, request: web.Request) -> Session:
        session = self.sessions.from_cookie(request.cookies.get(COOKIE))
        if session is None:
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": "Your session has ended: reload the page."}),
                content_type="application/json",
                headers=self.headers,
            )
        return session

    async def _post(self, request: web.Request) -> tuple[Session, dict[str, Any]]:
        session = self._session(request)
        given = request.headers.get(CSRF_HEADER, "")
        if not self._same_origin(request) or not hmac.compare_digest(
            given, self.sessions.csrf(session)
        ):
            raise web.HTTPForbidden(
                text=json.dumps({"error": "Not from this page: reload it and try again."}),
                content_type="application/json",
                headers=self.headers,
            )
        if request.content_type == "multipart/form-data":  # a question with files
            return session, await self.uploads.read(request)
        try:
            body = await request.json()
        except web.HTTPRequestEntityTooLarge as exc:  # said in words, as JSON, like the rest
            raise web.HTTPRequestEntityTooLarge(
                BODY_BYTES,
                request.content_length or BODY_BYTES + 1,
                text=json.dumps({"error": words.REQUEST_TOO_BIG, "reason": "question"}),
                content_type="application/json",
                headers=self.headers,
            ) from exc
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(
                text=json.dumps({"error": "The request is not a JSON object."}),
                content_type="application/json",
                headers=self.headers,
            )
        return session, body

    def _same_origin(self, request: web.Request) -> bool:
        """A browser names the page's origin on every POST; it must be one this server
        answers, and so must ``Host`` (the middleware checked both; checked again here so
        no POST depends on how the routes were mounted)."""
        return "Origin" in request.headers and host_refusal(self.hosts, request) is None

    def _set_cookie(self, request: web.Request, response: web.StreamResponse, value: str) -> None:
        response.set_cookie(
            COOKIE,
            value,
            httponly=True,
            samesite="Strict",
            secure=self.settings.secure_cookie or request.secure,  # always over https
            path="/",
            max_age=30 * 86400,
        )

    def _html(self, text: str, status: int = 200) -> web.Response:
        return web.Response(
            text=text, status=status, content_type="text/html", headers=self.headers
        )

    def _json(self, data: dict[str, Any], status: int = 200) -> web.Response:
        return web.json_response(data, status=status, headers=self.headers)


CLIENT_ID = re.compile(r"[0-9A-Za-z-]{8,64}")
"""The page's id for one question (``crypto.randomUUID()``): what a repeated POST repeats."""


def _client_id(given: object) -> str:
    """The page's id for the question, or one made here (an older page sends none; an id
    that is not one is not trusted as one)."""
    if isinstance(given, str) and CLIENT_ID.fullmatch(given):
        return given
    return secrets.token_hex(8)


def _newest(traces: dict[str, list[Trace]], question: str) -> Trace | None:
    """The newest trace of ``question`` not yet shown (taken from ``traces``), if any."""
    left = traces.get(question)
    return left.pop(0) if left else None


def _asset(name: str) -> str:
    return resources.files("adapters.web").joinpath("static", name).read_text(encoding="utf-8")
