"""A local fake of the Slack Web API for tests and benchmarks: real HTTP, no network.

Point ``AsyncWebClient(base_url=fake.base_url)`` (``slack.api_base_url``) at it::

    async with FakeSlack() as fake:
        fake.fail("chat.update", "ratelimited", status=429, retry_after=1)
        fake.not_joined.add("C_NOT_JOINED")
        ...
        assert fake.calls("chat.postMessage")[0].args["channel"] == "C1"

Implemented: ``auth.test``, ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``,
``conversations.info``, the ``files_upload_v2`` trio (``files.getUploadURLExternal``, the
upload URL, ``files.completeUploadExternal``), and ``response_url`` endpoints
(``fake.response_url(name)``). Every call is recorded with its arrival time.

Scripting:

- ``fail(method, error, status=200, retry_after=None, times=1)``: the next ``times`` calls of
  ``method`` answer ``{"ok": false, "error": error}`` (``ratelimited`` with 429 and a
  ``Retry-After`` header, ``msg_too_long``, ``not_in_channel``...).
- ``not_joined``: channels where posting answers ``not_in_channel``.
- ``limit(method, per_second)``: per channel, more than that many calls in any one-second
  window answer 429 (Slack's own behaviour, so a benchmark can count violations).
- ``max_text``: ``chat.update``/``chat.postMessage`` bodies whose block text is longer
  answer ``msg_too_long``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from tests.fakes.local_server import serve_locally

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    args: JSON
    at: float
    status: int
    error: str | None


@dataclass(slots=True)
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[JSON]
    thread_ts: str | None
    versions: list[tuple[float, str, list[JSON]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Failure:
    error: str
    status: int
    retry_after: int | None


BOT_USER_ID = "UBOTREACT"
BOT_ID = "BREACT"
TEAM_ID = "T0TEAM"


class FakeSlack:
    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.records: list[Call] = []
        self.messages: dict[str, Message] = {}
        self.responses: list[tuple[str, JSON]] = []
        self.uploads: dict[str, bytes] = {}
        self.not_joined: set[str] = set()
        self.max_text: int | None = None
        self.rate_limited = 0
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._limits: dict[str, int] = {}
        self._windows: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None

    # ---- lifecycle ------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{name}", self._response)
        self._runner, self.port = await serve_locally(app, host=self.host, shutdown_timeout=60.0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, name: str) -> str:
        return f"{self.url}/response/{name}"

    # ---- scripting ------------------------------------------------------------------------
    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
    ) -> Self:
        for _ in range(times):
            self._failures[method].append(_Failure(error, status, retry_after))
        return self

    def limit(self, method: str, per_second: int) -> Self:
        self._limits[method] = per_second
        return self

    # ---- inspection -----------------------------------------------------------------------
    def calls(self, method: str, *, ok: bool | None = None) -> list[Call]:
        return [
            c
            for c in self.records
            if c.method == method and (ok is None or (c.error is None) == ok)
        ]

    def roots(self, channel: str | None = None) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if m.thread_ts is None and (channel is None or m.channel == channel)
        ]

    def replies(self, channel: str, thread_ts: str) -> list[Message]:
        found = [
            m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts
        ]
        return sorted(found, key=lambda m: float(m.ts))

    # ---- handlers -------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        channel = str(args.get("channel") or args.get("channel_id") or "")
        failure = self._scripted_failure(method, channel, args)
        if failure is not None:
            return await self._answer(method, args, failure)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return await self._answer(method, args, _Failure("unknown_method", 404, None))
        result: JSON = handler(args)
        if not result.get("ok", False):
            return await self._answer(method, args, _Failure(str(result["error"]), 200, None))
        await self._record(Call(method, args, time.monotonic(), 200, None))
        return web.json_response(result)

    def _scripted_failure(self, method: str, channel: str, args: JSON) -> _Failure | None:
        if self._failures[method]:
            return self._failures[method].popleft()
        if method in self._limits and channel and not self._within_limit(method, channel):
            return _Failure("ratelimited", 429, 1)
        if method == "chat.postMessage" and channel in self.not_joined:
            return _Failure("not_in_channel", 200, None)
        if method in ("chat.update", "chat.postMessage") and self.max_text is not None:
            size = sum(_block_text(b) for b in _blocks(args))
            if size > self.max_text:
                return _Failure("msg_too_long", 200, None)
        return None

    def _within_limit(self, method: str, channel: str) -> bool:
        now = time.monotonic()
        window = self._windows[(method, channel)]
        while window and window[0] <= now - 1.0:
            window.popleft()
        if len(window) >= self._limits[method]:
            return False
        window.append(now)
        return True

    async def _answer(self, method: str, args: JSON, failure: _Failure) -> web.Response:
        if failure.status == 429:
            self.rate_limited += 1
        await self._record(Call(method, args, time.monotonic(), failure.status, failure.error))
        headers = (
            {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
        )
        body = {"ok": False, "error": failure.error}
        return web.json_response(body, status=failure.status, headers=headers)

    async def _record(self, call: Call) -> None:
        self.records.append(call)

    async def _upload(self, request: web.Request) -> web.Response:
        self.uploads[request.match_info["file_id"]] = await request.read()
        await self._record(
            Call("upload", {"file_id": request.match_info["file_id"]}, time.monotonic(), 200, None)
        )
        return web.Response(text=f"OK - {len(self.uploads[request.match_info['file_id']])}")

    async def _response(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.responses.append((request.match_info["name"], body))
        await self._record(Call("response_url", body, time.monotonic(), 200, None))
        return web.Response(text="ok")

    # ---- methods --------------------------------------------------------------------------
    def _m_auth_test(self, args: JSON) -> JSON:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "reactbot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _m_chat_postMessage(self, args: JSON) -> JSON:
        ts = f"1700000000.{next(self._ts):06d}"
        thread = args.get("thread_ts") or None
        message = Message(
            str(args["channel"]), ts, str(args.get("text", "")), _blocks(args), thread
        )
        message.versions.append((time.monotonic(), message.text, message.blocks))
        self.messages[ts] = message
        return {
            "ok": True,
            "channel": message.channel,
            "ts": ts,
            "message": {"text": message.text, "ts": ts},
        }

    def _m_chat_update(self, args: JSON) -> JSON:
        message = self.messages.get(str(args.get("ts")))
        if message is None or message.channel != args.get("channel"):
            return {"ok": False, "error": "message_not_found"}
        message.text, message.blocks = str(args.get("text", "")), _blocks(args)
        message.versions.append((time.monotonic(), message.text, message.blocks))
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _m_chat_postEphemeral(self, args: JSON) -> JSON:
        return {"ok": True, "message_ts": f"1700000000.{next(self._ts):06d}"}

    def _m_conversations_info(self, args: JSON) -> JSON:
        channel = str(args.get("channel", ""))
        return {"ok": True, "channel": {"id": channel, "is_member": channel not in self.not_joined}}

    def _m_files_getUploadURLExternal(self, args: JSON) -> JSON:
        file_id = f"F{next(self._ts):08d}"
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, args: JSON) -> JSON:
        files = args.get("files")
        parsed = json.loads(files) if isinstance(files, str) else files or []
        return {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in parsed]}


async def _read_args(request: web.Request) -> JSON:
    args: JSON = dict(request.query)
    if request.content_type == "application/json":
        args.update(await request.json())
    elif request.can_read_body:
        args.update(dict(await request.post()))
    return args


def _blocks(args: JSON) -> list[JSON]:
    blocks = args.get("blocks") or []
    parsed = json.loads(blocks) if isinstance(blocks, str) else blocks
    return list(parsed)


def _block_text(block: JSON) -> int:
    size = len(block.get("text", {}).get("text", "")) if isinstance(block.get("text"), dict) else 0
    return size + sum(
        len(e.get("text", "")) for e in block.get("elements", ()) if isinstance(e, dict)
    )


def message_text(message: Message) -> str:
    """Everything visible in a message, joined (for assertions)."""
    parts = [message.text]
    for block in message.blocks:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        parts += [
            e["text"] for e in block.get("elements", ()) if isinstance(e, dict) and "text" in e
        ]
    return "\n".join(parts)
