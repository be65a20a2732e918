"""A local fake of the Tavily search API, on a free 127.0.0.1 port, for tavily-python to talk to.

It speaks the wire format tavily-python 0.8 uses: ``POST /search`` with a JSON body (``query``,
``max_results``, ``include_answer``, ...) and ``Authorization: Bearer <key>``; answers
``{"query", "answer", "results": [{"title", "url", "content", "score"}], "response_time"}``,
and errors as ``{"detail": {"error": "..."}}``, the shape tavily-python reads its message from.

Replies are scripted per request (``enqueue``); with the script empty it answers
``default``. Every request is recorded. Usage::

    async with FakeTavily(api_key="tvly-test") as fake:
        fake.enqueue(Reply.error(429))
        client = AsyncTavilyClient(api_key="tvly-test", api_base_url=fake.base_url)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict

from tests.fakes.local_server import serve_locally

DEFAULT_RESULTS: tuple[dict[str, Any], ...] = (
    {
        "title": "2022 FIFA World Cup final - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/2022_FIFA_World_Cup_final",
        "content": "Argentina and France drew 3-3 after extra time; Argentina won on penalties.",
        "score": 0.98,
    },
    {
        "title": "Argentina win World Cup on penalties",
        "url": "https://www.example.com/sport/world-cup-final",
        "content": "Lionel Messi scored twice as Argentina beat France in Lusail.",
        "score": 0.91,
    },
)

_ERROR_TEXT = {
    400: "Bad request.",
    401: "Unauthorized: missing or invalid API key.",
    403: "Forbidden.",
    429: "Too many requests. Please slow down.",
    432: "This request exceeds your plan's set usage limit.",
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the class methods."""

    status: int = 200
    results: tuple[dict[str, Any], ...] = DEFAULT_RESULTS
    answer: str | None = "Argentina beat France on penalties after a 3-3 draw."
    delay: float = 0.0
    raw_body: str | None = None  # sent verbatim instead of the JSON built from the rest

    @classmethod
    def ok(cls, results: list[dict[str, Any]], answer: str | None = None) -> Reply:
        return cls(results=tuple(results), answer=answer)

    @classmethod
    def empty(cls) -> Reply:
        return cls(results=(), answer=None)

    @classmethod
    def error(cls, status: int, message: str | None = None) -> Reply:
        text = message or _ERROR_TEXT.get(status, "Internal server error.")
        return cls(status=status, raw_body=json.dumps({"detail": {"error": text}}))

    @classmethod
    def slow(cls, delay: float) -> Reply:
        return cls(delay=delay)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: CIMultiDict[str]
    body: dict[str, Any]


@dataclass
class FakeTavily:
    """The fake server. ``api_key``: when set, requests without that bearer key get a 401."""

    api_key: str | None = None
    default: Reply = field(default_factory=Reply)
    requests: list[RecordedRequest] = field(default_factory=list)
    _script: deque[Reply] = field(default_factory=deque)
    _runner: web.AppRunner | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _port: int = 0

    def enqueue(self, *replies: Reply) -> None:
        self._script.extend(replies)

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("the fake Tavily server is not running")
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/search", self._search)
        self._runner, self._port = await serve_locally(app)

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _search(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(
            RecordedRequest(request.method, request.path, CIMultiDict(request.headers), body)
        )
        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            return _json_response(401, Reply.error(401).raw_body or "")
        reply = self._script.popleft() if self._script else self.default
        if reply.delay:
            await self._sleep(reply.delay)
        if reply.raw_body is not None:
            return _json_response(reply.status, reply.raw_body)
        return _json_response(reply.status, json.dumps(_search_body(body, reply)))

    async def _sleep(self, delay: float) -> None:
        """Sleeps, but wakes at once when the server shuts down."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), delay)


def _search_body(request_body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    max_results = int(request_body.get("max_results") or 5)
    return {
        "query": request_body.get("query", ""),
        "follow_up_questions": None,
        "answer": reply.answer if request_body.get("include_answer") else None,
        "images": [],
        "results": [dict(r, raw_content=None) for r in reply.results[:max_results]],
        "response_time": 0.42,
        "request_id": "fake-0001",
    }


def _json_response(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="application/json")
