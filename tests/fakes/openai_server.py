"""A scripted, OpenAI-compatible HTTP server for tests: real HTTP, real SSE, no network.

Each request to ``POST /v1/chat/completions`` takes the next scripted response off a queue.
The server speaks the wire format the ``openai`` SDK expects (``data: {json}`` events,
``chat.completion.chunk`` objects, a usage chunk with ``choices: []`` when the request asked
for ``stream_options.include_usage``, then ``data: [DONE]``), so the real SDK runs unpatched.

Usage::

    async with FakeOpenAI() as fake:
        fake.error(429, retry_after=0.2)
        fake.reply("Thought: easy.\\nAnswer: 4", chunks=4, usage=FakeUsage(12, 5))
        model = OpenAIChatModel(model="m", base_url=fake.base_url, api_key="sk-test")
        ...
        assert fake.requests[-1]["stop"] == ["\\nObservation:"]
        fake.assert_complete()

Scripted responses (each method returns the fake, so calls chain):

- ``reply(text, ...)``: a streamed answer. By default it honours the request's ``stop`` by
  cutting the text at the first stop string, as OpenAI does; ``ignore_stop=True`` turns that off
  (some local servers do). Options: ``chunks`` (explicit pieces, or a piece size), ``reasoning``
  pieces sent before the text as ``delta.reasoning_content`` (or ``reasoning_field="reasoning"``),
  ``tool_calls``, ``usage``, a per-chunk ``delay``, ``stall_after=N`` (send N text chunks, then
  go silent for ``stall_for`` seconds without closing the connection), ``finish_reason``,
  ``refusal`` pieces (the model declining: sent as ``delta.refusal`` with ``content`` null, as
  OpenAI streams a refusal, instead of any text).
- ``error(status, message, ...)``: an HTTP error with OpenAI's JSON body
  ``{"error": {"message", "type", "param", "code"}}``; ``retry_after`` / ``retry_after_ms`` set
  the headers of those names; ``raw_body`` sends text instead (a proxy's HTML page).
- ``drop(text, chunks=...)``: stream those chunks, then cut the TCP connection mid-body.
- ``stream_error(message, text)``: stream ``text``, then an in-band ``{"error": ...}`` event.

``reply(..., when=predicate)`` keeps a reply for the first request whose body the predicate
accepts (several processes asking at once, in no fixed order: each question gets its own
script); a request takes the first queued response it matches, a response without ``when``
matching any. A request that finds no response for it gets a 500 and is remembered; ``assert_complete()`` fails
on it and on scripted responses that were never used (the strict-script rule in STYLE.md).
Closing the fake releases stalled handlers at once, so tests never wait for ``stall_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from tests.fakes.local_server import serve_locally

__all__ = [
    "Drop",
    "FakeOpenAI",
    "FakeToolCall",
    "FakeUsage",
    "HTTPError",
    "Reply",
    "StreamError",
]

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FakeUsage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    """Sent as ``prompt_tokens_details.cached_tokens`` when not None."""

    def to_json(self) -> JSON:
        usage: JSON = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A native tool call, streamed as an id/name delta followed by argument pieces."""

    name: str
    arguments: str
    id: str = "call_0"
    argument_chunk_size: int = 8


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    chunks: tuple[str, ...]
    reasoning: tuple[str, ...] = ()
    reasoning_field: str = "reasoning_content"
    tool_calls: tuple[FakeToolCall, ...] = ()
    usage: FakeUsage | None = None
    delay: float = 0.0
    stall_after: int | None = None
    stall_for: float = 3600.0
    ignore_stop: bool = False
    finish_reason: str = "stop"
    refusal: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HTTPError:
    status: int
    message: str
    type: str | None
    code: str | None
    headers: Mapping[str, str] = field(default_factory=dict)
    raw_body: str | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    chunks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StreamError:
    chunks: tuple[str, ...]
    message: str


@dataclass(frozen=True, slots=True)
class RawStream:
    pieces: tuple[bytes, ...]
    hold: bool


Scripted = Reply | HTTPError | Drop | StreamError | RawStream

_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class FakeOpenAI:
    """The scripted server. Use as ``async with FakeOpenAI() as fake`` (or ``start``/``close``)."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        unsupported: Sequence[str] = (),
        response_formats: Sequence[str] = ("text", "json_object", "json_schema"),
        vision: bool = False,
    ) -> None:
        self.model = model
        self.vision = vision
        """The model reads ``image_url`` content parts; without it they are refused (400)."""
        self.response_formats = frozenset(response_formats)
        """The ``response_format`` types this model takes; others get OpenAI's 400."""
        self.unsupported = frozenset(unsupported)
        """Request parameters this model refuses with OpenAI's ``unsupported_parameter`` 400
        (OpenAI's reasoning models refuse ``max_tokens``), before the script is consulted."""
        self.requests: list[JSON] = []
        """Every request body (parsed JSON), in arrival order, including failed ones."""
        self.request_headers: list[dict[str, str]] = []
        """The headers of each request, aligned with ``requests``."""
        self.request_times: list[float] = []
        """When each request arrived (``time.monotonic()``), aligned with ``requests``."""
        self.request_peers: list[object] = []
        """The client's address and port of each request's connection: a connection used
        again shows the same port."""
        self._script: deque[Scripted] = deque()
        self._when: dict[int, Callable[[JSON], bool]] = {}
        """The ``when`` of a scripted response, by its ``id()`` (kept while it is queued)."""
        self._unexpected: list[JSON] = []
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- scripting -------------------------------------------------------------------------

    def reply(
        self,
        text: str = "",
        *,
        chunks: Sequence[str] | int | None = None,
        reasoning: Sequence[str] = (),
        reasoning_field: str = "reasoning_content",
        tool_calls: Sequence[FakeToolCall] = (),
        usage: FakeUsage | None = None,
        delay: float = 0.0,
        stall_after: int | None = None,
        stall_for: float = 3600.0,
        ignore_stop: bool = False,
        finish_reason: str | None = None,
        refusal: Sequence[str] = (),
        when: Callable[[JSON], bool] | None = None,
    ) -> Self:
        """Queue a streamed reply.

        ``chunks``: the text pieces (they must join to ``text``), or a piece size in characters;
        by default the text is split after each word, like a tokenizer would roughly do.
        ``usage``: reported when the request asks for it; by default it is estimated from
        the request and the reply, so clients always see some usage.
        ``when``: only a request whose body it accepts takes this reply.
        """
        reply = Reply(
            text=text,
            chunks=_split(text, chunks),
            reasoning=tuple(reasoning),
            reasoning_field=reasoning_field,
            tool_calls=tuple(tool_calls),
            usage=usage,
            delay=delay,
            stall_after=stall_after,
            stall_for=stall_for,
            ignore_stop=ignore_stop,
            finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
            refusal=tuple(refusal),
        )
        self._script.append(reply)
        if when is not None:
            self._when[id(reply)] = when
        return self

    def error(
        self,
        status: int,
        message: str | None = None,
        *,
        type: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        headers: Mapping[str, str] | None = None,
        raw_body: str | None = None,
    ) -> Self:
        """Queue an HTTP error response with an OpenAI-shaped JSON body.

        ``raw_body`` replaces the JSON with text, as a proxy's HTML error page would.
        """
        all_headers = dict(headers or {})
        if retry_after is not None:
            all_headers["retry-after"] = f"{retry_after:g}"
        if retry_after_ms is not None:
            all_headers["retry-after-ms"] = f"{retry_after_ms:g}"
        self._script.append(
            HTTPError(
                status=status,
                message=message if message is not None else f"fake error {status}",
                type=type if type is not None else _DEFAULT_ERROR_TYPES.get(status, "server_error"),
                code=code,
                headers=all_headers,
                raw_body=raw_body,
            )
        )
        return self

    def drop(self, text: str = "", *, chunks: Sequence[str] | int | None = None) -> Self:
        """Queue a stream that sends ``text`` (split like ``reply``), then cuts the connection."""
        self._script.append(Drop(chunks=_split(text, chunks)))
        return self

    def stream_error(
        self, message: str, text: str = "", *, chunks: Sequence[str] | int | None = None
    ) -> Self:
        """Queue a stream that sends ``text``, then an in-band ``data: {"error": ...}`` event.

        OpenRouter and vLLM report failures this way once the 200 status has been sent.
        """
        self._script.append(StreamError(chunks=_split(text, chunks), message=message))
        return self

    def raw(self, body: bytes, *, size: int | None = None, hold: bool = False) -> Self:
        """Queue a 200 ``text/event-stream`` response whose body is exactly ``body``, written
        in ``size``-byte pieces (each flushed on its own; one piece by default): a provider's
        stream as it was captured, with its comments, line ends and shapes. ``hold``: the
        body never ends (the connection stays open until the fake closes)."""
        step = size or max(1, len(body))
        pieces = tuple(body[at : at + step] for at in range(0, len(body), step))
        self._script.append(RawStream(pieces=pieces, hold=hold))
        return self

    # -- inspection ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: pass it as the client's ``base_url``."""
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def pending(self) -> int:
        """How many scripted responses are still unused."""
        return len(self._script)

    def assert_complete(self) -> None:
        """Fail if scripted responses were left unused or a request found the script empty."""
        problems = []
        if self._script:
            problems.append(f"{len(self._script)} scripted response(s) never requested")
        if self._unexpected:
            problems.append(f"{len(self._unexpected)} request(s) arrived with the script empty")
        assert not problems, "FakeOpenAI: " + "; ".join(problems)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        self._runner, self._port = await serve_locally(app)

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- serving ---------------------------------------------------------------------------

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        body: JSON = await request.json()
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        self.request_times.append(time.monotonic())
        self.request_peers.append(
            request.transport.get_extra_info("peername") if request.transport else None
        )
        refused = sorted(self.unsupported & body.keys())
        if refused:
            return _unsupported(refused[0])
        problem = _message_problem(body.get("messages"), vision=self.vision)
        if problem is not None:
            return _invalid(*problem)
        kind = (body.get("response_format") or {}).get("type")
        if kind is not None and kind not in self.response_formats:
            return _unsupported_format(kind)
        scripted = self._take(body)
        if scripted is None:
            self._unexpected.append(body)
            return _error_response(
                HTTPError(500, "FakeOpenAI: no scripted response left", "server_error", None)
            )
        match scripted:
            case HTTPError():
                return _error_response(scripted)
            case Drop():
                return await self._drop(request, body, scripted)
            case StreamError():
                return await self._stream_error(request, body, scripted)
            case RawStream():
                return await self._raw(request, scripted)
            case Reply() if not body.get("stream"):
                return web.json_response(self._completion(body, scripted))
            case Reply():
                return await self._stream(request, body, scripted)

    def _take(self, body: JSON) -> Scripted | None:
        """The first queued response for this request (its ``when``, if any, accepts it)."""
        for index, scripted in enumerate(self._script):
            when = self._when.get(id(scripted))
            if when is None or when(body):
                del self._script[index]  # by place: equal replies are still different ones
                self._when.pop(id(scripted), None)
                return scripted
        return None

    async def _stream(self, request: web.Request, body: JSON, reply: Reply) -> web.StreamResponse:
        response = await _open_sse(request)
        sse = _ChunkWriter(
            response,
            model=self.model,
            include_usage=_wants_usage(body),
            reply_id=f"chatcmpl-fake-{len(self.requests)}",  # one id per reply, as OpenAI's
        )
        if reply.refusal:  # OpenAI's shape: content null throughout, the words in refusal
            await sse.send({"role": "assistant", "content": None, "refusal": ""})
            for piece in reply.refusal:
                await sse.send({"refusal": piece}, delay=reply.delay)
        else:
            await sse.send({"role": "assistant", "content": ""})
        for piece in reply.reasoning:
            await sse.send({reply.reasoning_field: piece}, delay=reply.delay)
        for sent, piece in enumerate(_honour_stop(reply, body)):
            if reply.stall_after is not None and sent == reply.stall_after:
                await self._stall(reply.stall_for)
            await sse.send({"content": piece}, delay=reply.delay)
        for delta in _tool_call_deltas(reply.tool_calls):
            await sse.send({"tool_calls": [delta]}, delay=reply.delay)
        await sse.send({}, finish_reason=reply.finish_reason)
        if sse.include_usage:
            await sse.send_usage(reply.usage or _estimate_usage(body, reply))
        await sse.done()
        return response

    async def _drop(self, request: web.Request, body: JSON, drop: Drop) -> web.StreamResponse:
        response = await _open_sse(request)
        sse = _ChunkWriter(response, model=self.model, include_usage=_wants_usage(body))
        await sse.send({"role": "assistant", "content": ""})
        for piece in drop.chunks:
            await sse.send({"content": piece})
        # Abort (RST) rather than close: the client must see a body that ends without the
        # terminating chunk, exactly as when a proxy or the provider dies mid-reply.
        assert request.transport is not None
        request.transport.abort()
        return response

    async def _stream_error(
        self, request: web.Request, body: JSON, failure: StreamError
    ) -> web.StreamResponse:
        response = await _open_sse(request)
        sse = _ChunkWriter(response, model=self.model, include_usage=_wants_usage(body))
        await sse.send({"role": "assistant", "content": ""})
        for piece in failure.chunks:
            await sse.send({"content": piece})
        error = {"message": failure.message, "type": "server_error", "code": None}
        await response.write(f"data: {json.dumps({'error': error})}\n\n".encode())
        await response.write_eof()
        return response

    async def _raw(self, request: web.Request, raw: RawStream) -> web.StreamResponse:
        response = await _open_sse(request)
        for piece in raw.pieces:
            await response.write(piece)
            await asyncio.sleep(0)  # each piece its own write, not coalesced by the buffer
        if raw.hold:
            await self._stall(3600)
        await response.write_eof()
        return response

    async def _stall(self, seconds: float) -> None:
        # Wait on the closing event, not a bare sleep, so shutting the fake down is instant.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closing.wait()

    def _completion(self, body: JSON, reply: Reply) -> JSON:
        """The non-streaming form, for callers that do not pass ``stream=True``."""
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(_honour_stop(reply, body))},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": (reply.usage or _estimate_usage(body, reply)).to_json(),
        }


class _ChunkWriter:
    """Writes ``chat.completion.chunk`` events in OpenAI's exact shape."""

    def __init__(
        self,
        response: web.StreamResponse,
        *,
        model: str,
        include_usage: bool,
        reply_id: str = "chatcmpl-fake",
    ) -> None:
        self._response = response
        self._model = model
        self._id = reply_id
        self._created = int(time.time())
        self.include_usage = include_usage

    async def send(
        self, delta: JSON, *, finish_reason: str | None = None, delay: float = 0
    ) -> None:
        if delay:
            await asyncio.sleep(delay)
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        await self._event(self._chunk([choice]))

    async def send_usage(self, usage: FakeUsage) -> None:
        await self._event(self._chunk([]) | {"usage": usage.to_json()})

    async def done(self) -> None:
        await self._response.write(b"data: [DONE]\n\n")
        await self._response.write_eof()

    def _chunk(self, choices: list[JSON]) -> JSON:
        chunk: JSON = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = None  # OpenAI sends null on every chunk but the last
        return chunk

    async def _event(self, data: JSON) -> None:
        await self._response.write(f"data: {json.dumps(data)}\n\n".encode())


async def _open_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    return response


def _error_response(error: HTTPError) -> web.Response:
    if error.raw_body is not None:
        return web.Response(text=error.raw_body, status=error.status, headers=dict(error.headers))
    payload = {
        "error": {"message": error.message, "type": error.type, "param": None, "code": error.code}
    }
    return web.json_response(payload, status=error.status, headers=dict(error.headers))


def _unsupported(param: str) -> web.Response:
    """OpenAI's answer to a parameter the model does not take (seen for ``max_tokens`` on the
    o-series: it names the parameter to use instead)."""
    instead = {"max_tokens": " Use 'max_completion_tokens' instead."}.get(param, "")
    message = f"Unsupported parameter: '{param}' is not supported with this model.{instead}"
    payload = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": "unsupported_parameter",
        }
    }
    return web.json_response(payload, status=400)


def _unsupported_format(kind: str) -> web.Response:
    """OpenAI's 400 for a ``response_format`` the model cannot produce."""
    message = (
        f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model."
    )
    payload = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    }
    return web.json_response(payload, status=400)


def _split(text: str, chunks: Sequence[str] | int | None) -> tuple[str, ...]:
    if chunks is None:
        return tuple(re.findall(r"\S+\s*|\s+", text))
    if isinstance(chunks, int):
        return tuple(text[i : i + chunks] for i in range(0, len(text), chunks))
    if "".join(chunks) != text:
        raise ValueError("FakeOpenAI.reply: chunks must join to the text")
    return tuple(chunks)


def _honour_stop(reply: Reply, body: JSON) -> tuple[str, ...]:
    """The chunks up to (not including) the first stop string, as OpenAI cuts them."""
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if reply.ignore_stop or not stops:
        return reply.chunks
    cut = min((i for s in stops if (i := reply.text.find(s)) >= 0), default=len(reply.text))
    kept: list[str] = []
    sent = 0
    for piece in reply.chunks:
        if sent >= cut:
            break
        kept.append(piece[: cut - sent])
        sent += len(piece)
    return tuple(p for p in kept if p)


def _tool_call_deltas(calls: Sequence[FakeToolCall]) -> list[JSON]:
    """As OpenAI streams them: a first delta per call with its id, type and name (and empty
    arguments), then the arguments in pieces cut anywhere (mid-token, mid-escape), the
    calls' pieces interleaved round-robin by index the way parallel calls arrive."""
    heads = [
        {
            "index": index,
            "id": call.id if call.id != "call_0" or index == 0 else f"call_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        for index, call in enumerate(calls)
    ]
    pieces = [
        [
            {"index": index, "function": {"arguments": call.arguments[start : start + size]}}
            for start in range(0, len(call.arguments), size)
        ]
        for index, call in enumerate(calls)
        for size in [max(1, call.argument_chunk_size)]
    ]
    deltas: list[JSON] = list(heads)
    for row in range(max((len(p) for p in pieces), default=0)):
        deltas += [p[row] for p in pieces if row < len(p)]
    return deltas


def _wants_usage(body: JSON) -> bool:
    options = body.get("stream_options") or {}
    return bool(options.get("include_usage"))


def _estimate_usage(body: JSON, reply: Reply) -> FakeUsage:
    """A rough token count (words), so clients always see plausible, non-zero usage."""
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    completion = len(reply.chunks) + len(reply.reasoning)
    return FakeUsage(prompt_tokens=max(prompt, 1), completion_tokens=completion)


MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})
"""What a chat message may hold; OpenAI refuses any other key with a 400."""


def _message_problem(messages: Any, *, vision: bool) -> tuple[str, str] | None:
    """Why OpenAI would refuse these messages (message, param), or None. Content is a string
    or a list of parts: ``text`` parts with a string, ``image_url`` parts with an https or a
    ``data:image/...;base64,`` URL, and those only for a model that reads images."""
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array", "messages"
    for i, message in enumerate(messages):
        extra = sorted(set(message) - MESSAGE_KEYS)
        if extra:
            return f"Additional properties are not allowed ('{extra[0]}' was unexpected)", (
                f"messages.[{i}]"
            )
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list) or not content:
            return "Invalid type for 'content'", f"messages.[{i}].content"
        for j, part in enumerate(content):
            where = f"messages.[{i}].content.[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                continue
            if kind != "image_url":
                return f"Invalid value: '{kind}'. Supported values are: 'text' and 'image_url'.", (
                    f"{where}.type"
                )
            if not vision:
                return "Invalid content type. image_url is only supported by certain models.", (
                    f"{where}.type"
                )
            url = (part.get("image_url") or {}).get("url")
            if not isinstance(url, str) or not (
                url.startswith("https://")
                or re.match(r"data:image/[a-z]+;base64,[A-Za-z0-9+/=]+$", url)
            ):
                return (
                    "Invalid image URL: expected a URL or a base64 data URL.",
                    f"{where}.image_url.url",
                )
    return None


def _invalid(message: str, param: str) -> web.Response:
    payload = {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }
    return web.json_response(payload, status=400)
