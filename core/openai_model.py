"""``OpenAIChatModel``: the ChatModel for any OpenAI-compatible endpoint, via the ``openai`` SDK.

Works with OpenAI, DeepSeek, Qwen/DashScope, vLLM, OpenRouter, Ollama and llama.cpp server.
The SDK's client sends the request (auth, base URL, timeouts, headers, status errors); the
body is ours (``EncodedHistories``: a run's history is encoded once), and so is the reading
of the stream: the SSE bytes through ``core.sse.SSEDecoder``, each event's ``json.loads``
straight into ``ModelChunk``s (``core.openai_reply.Reply``), never the SDK's pydantic
chunk models (building them was a quarter of the bot's CPU).
What it adds on top of the SDK:

- its own bounded retries (the SDK's are off), only before the first chunk reached the caller,
  so a retry can never duplicate text; a ``ModelChunk(notice=...)`` precedes each wait;
- reasoning text, from ``delta.reasoning_content`` / ``delta.reasoning`` or from
  ``<think>...</think>`` inside the content, yielded as ``ModelChunk(reasoning=...)``;
- a refusal (``delta.refusal``) as ``ModelChunk(refusal=...)``;
- one ``ModelChunk(usage=...)`` at the end, when the provider reports usage;
- a fallback for providers that reject ``stream_options``;
- an error inside the stream (``event: error``, or ``{"error": ...}`` data) raised as the
  provider's words, whatever shape it takes;
- every SDK error mapped to ``core.errors`` with a message fit for a chat, with the key redacted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import ssl
import sys
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import httpx2
import openai
from openai import AsyncOpenAI

from core.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
    ResponseFormatRefused,
)
from core.llm import Message, ModelChunk, ResponseFormat, ToolSpec
from core.openai_reply import Reply, ThinkSplitter, parse_json
from core.sse import SSEDecoder

__all__ = ["OpenAIChatModel", "ReplyReader", "ThinkSplitter"]

# Local servers (Ollama, llama.cpp) ignore the key, but the SDK refuses to run without one.
_PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"
"""Where the SDK sends requests when no ``base_url`` is given."""
# A server asking us to wait longer than this is better answered with an error the user sees
# than with a chat that silently hangs.
_MAX_RETRY_AFTER = 30.0
_MAX_BACKOFF = 30.0
_MAX_PROVIDER_MESSAGE = 300
_DRAIN_SECONDS = 0.1
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Key-looking strings a provider might echo back (OpenAI echoes a masked key on 401).
_SECRET_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}|Bearer\s+\S+", re.IGNORECASE)


class OpenAIChatModel:
    """Streams chat completions from an OpenAI-compatible endpoint.

    The SDK client is created on first use (no I/O in the constructor) and closed by
    ``aclose()``. One instance may serve many concurrent ``stream`` calls. ``transport``
    makes the HTTP transport beneath the SDK's client (the app gives it aiohttp's,
    ``bot.model_transport``); without it, httpx2's own.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        request_timeout: float = 60,
        max_retries: int = 3,
        backoff: float = 1.0,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        self._request_timeout = request_timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._extra_body = extra_body
        self._transport = transport
        self._client: AsyncOpenAI | None = None
        self._histories = EncodedHistories()
        # What this endpoint accepts, learnt from its refusals (remembered per instance):
        self._send_stream_options = True
        self._token_limit_name = "max_tokens"
        """OpenAI's reasoning models refuse it and want ``max_completion_tokens``."""

    @property
    def name(self) -> str:
        return self._model

    @property
    def temperature(self) -> float | None:
        return self._temperature

    @property
    def max_tokens(self) -> int | None:
        return self._max_tokens

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self._model!r}, base_url={self._base_url!r})"

    @property
    def endpoint(self) -> str:
        """The provider's host (and port), for messages: never a path, query or credentials."""
        if not self._base_url:
            return OPENAI_HOST
        parts = urlsplit(self._base_url)
        host = parts.hostname or "?"
        try:
            port = parts.port
        except ValueError:
            port = None
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{port}" if port else host

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncGenerator[ModelChunk, None]:
        # An AsyncGenerator (still an AsyncIterator for the protocol), so callers can aclose()
        # it to release the connection when they stop early.
        if self._api_key is None and self._base_url is None:
            # OpenAI itself always wants a key: say so now rather than after the retries.
            raise ModelAuthError(
                f"No API key for the model provider at {OPENAI_HOST}: set OPENAI_API_KEY, or "
                "OPENAI_BASE_URL to use another OpenAI-compatible server."
            )
        request = _Request(messages, stop, tools, response_format)
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            started = False
            try:
                # One request, start to end, read here rather than through a generator of its
                # own: every chunk passes this loop, and each generator layer costs per chunk.
                response = await self._create(request)
                read = ReplyReader(Reply(), SSEDecoder(), response.request)
                try:
                    body = _body_of(response)
                    async for raw in body:
                        pieces, done, failed = read(raw)
                        if pieces:
                            started = True
                            for piece in pieces:
                                yield piece
                        if failed is not None:
                            raise failed
                        if done:
                            await _drain(body)
                            break
                except httpx2.TimeoutException as exc:
                    raise openai.APITimeoutError(request=response.request) from exc
                except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
                    raise openai.APIConnectionError(request=response.request) from exc
                except (ValueError, RecursionError) as exc:
                    # not JSON, not an object (MalformedChunk), or nested past the parser's depth
                    raise ModelUnavailable(
                        f"The model provider at {self.endpoint} sent a malformed stream."
                    ) from exc
                finally:
                    await response.aclose()
                for piece in read.reply.close():
                    yield piece
                return
            except openai.APIError as exc:
                delay = None if started or attempt == attempts else self._retry_delay(exc, attempt)
                if delay is None:
                    raise self._map_error(exc, started=started) from exc
                notice = f"{_retry_reason(exc, self.endpoint)}; retrying in {delay:.1f} s "
                notice += f"(attempt {attempt + 1}/{attempts})"
            # Outside the except block: yielding there would keep the exception context alive
            # across the consumer's code and the sleep.
            yield ModelChunk(notice=notice, pause=delay)
            await asyncio.sleep(delay)

    # -- one request -----------------------------------------------------------------------

    async def _create(self, request: _Request) -> httpx2.Response:
        while True:  # each refusal is adapted to once, so this ends
            try:
                return await self._request(request)
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if not self._adapt_to(exc):
                    if request.response_format is not None and _names_response_format(exc):
                        raise ResponseFormatRefused(
                            "The model provider does not take this response_format"
                            f"{self._provider_message(exc)}"
                        ) from exc
                    raise

    def _adapt_to(self, exc: openai.APIStatusError) -> bool:
        """Drop or rename a parameter the endpoint refused; True when worth asking again."""
        text = str(exc.body or exc.message).lower()
        if self._send_stream_options and "stream_options" in text:
            self._send_stream_options = False
            return True
        if self._token_limit_name == "max_tokens" and "max_completion_tokens" in text:
            self._token_limit_name = "max_completion_tokens"
            return True
        return False

    async def _request(self, request: _Request) -> httpx2.Response:
        """The request, sent by the SDK's client (its auth, base URL, timeouts, headers and
        status errors) with a body we encode: the SDK's own ``create`` walks every message
        of the history through its typing transform on each call, and parses every chunk
        of the reply into a pydantic model; both are skipped. The response comes back
        unread, its status already checked."""
        return await self._get_client().post(
            "/chat/completions",
            cast_to=httpx2.Response,
            content=self._body(request),
            stream=True,
            stream_cls=None,
        )

    def _body(self, request: _Request) -> bytes:
        """The request's JSON. The messages come from ``EncodedHistories``: a run's history
        is encoded once and each step adds only its own messages."""
        body: dict[str, Any] = {"model": self._model, "stream": True}
        if request.stop:
            body["stop"] = list(request.stop)
        if self._send_stream_options:
            body["stream_options"] = {"include_usage": True}
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if request.tools:
            body["tools"] = list(request.tools)
            body["tool_choice"] = "auto"
        if request.response_format:
            body["response_format"] = request.response_format
        if self._max_tokens is not None:
            body[self._token_limit_name] = self._max_tokens
        if self._extra_body:
            body.update(self._extra_body)  # as the SDK merges it: its keys win
            if "messages" in body:
                return json.dumps(body, ensure_ascii=False).encode()
        rest = json.dumps(body, ensure_ascii=False)
        return f'{{"messages":{self._histories.encode(request.messages)},{rest[1:]}'.encode()

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            http_client = None
            if self._transport is not None:
                http_client = openai.DefaultAsyncHttpxClient(transport=self._transport())
            self._client = AsyncOpenAI(
                http_client=http_client,
                base_url=self._base_url,
                api_key=self._api_key or _PLACEHOLDER_KEY,
                max_retries=0,  # we retry ourselves, and only before the first chunk
                # Read timeout per socket read: a dead connection fails instead of hanging.
                timeout=openai.Timeout(
                    self._request_timeout, connect=min(self._request_timeout, 10.0)
                ),
            )
        return self._client

    # -- retries and errors ----------------------------------------------------------------

    def _retry_delay(self, exc: openai.APIError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None when this error is final."""
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code not in _RETRYABLE_STATUS:
                return None
            asked = _retry_after(exc)
            if asked is not None:
                return asked if asked <= _MAX_RETRY_AFTER else None
        elif not isinstance(exc, openai.APIConnectionError):
            return None  # an error event inside the stream: the provider meant it
        # Exponential backoff with jitter, so many bot replicas do not retry in lockstep.
        delay = min(self._backoff * 2.0 ** (attempt - 1), _MAX_BACKOFF)
        return delay * random.uniform(0.75, 1.0)

    def _map_error(self, exc: openai.APIError, *, started: bool) -> ModelError:
        detail = self._provider_message(exc)
        if isinstance(exc, openai.APITimeoutError):
            return ModelTimeout(
                f"The model provider at {self.endpoint} did not answer within {self._request_timeout:g} s."
            )
        if isinstance(exc, openai.APIConnectionError):
            if started:
                return ModelUnavailable(
                    f"The connection to the model provider at {self.endpoint} dropped in the "
                    "middle of the reply."
                )
            return ModelUnavailable(f"Could not reach the model provider at {self.endpoint}.")
        if not isinstance(exc, openai.APIStatusError):
            return ModelUnavailable(
                f"The model provider at {self.endpoint} reported an error{detail}"
            )
        status = exc.status_code
        if status == 429:
            return ModelRateLimited(
                f"The model provider at {self.endpoint} is rate-limiting us (HTTP 429){detail}"
            )
        if status in (401, 403):
            return ModelAuthError(
                f"The model provider at {self.endpoint} refused the credentials (HTTP {status}){detail} "
                "Check the API key."
            )
        if status == 408:
            return ModelTimeout(
                f"The model provider at {self.endpoint} timed out (HTTP 408){detail}"
            )
        if status >= 500:
            return ModelUnavailable(
                f"The model provider at {self.endpoint} is unavailable (HTTP {status}){detail}"
            )
        return ModelBadRequest(
            f"The model provider at {self.endpoint} rejected the request (HTTP {status}){detail}"
        )

    def _provider_message(self, exc: openai.APIError) -> str:
        """``": <provider's message>."`` trimmed and with secrets removed, or ``"."``."""
        body = exc.body
        raw = body.get("message") if isinstance(body, dict) else body
        # A proxy's HTML error page tells a chat user nothing; the status code says enough.
        if not isinstance(raw, str) or not raw.strip() or raw.lstrip().startswith("<"):
            return "."
        text = " ".join(raw.split())
        if self._api_key:
            text = text.replace(self._api_key, "***")
        text = _SECRET_PATTERN.sub("***", text)
        if len(text) > _MAX_PROVIDER_MESSAGE:
            text = text[: _MAX_PROVIDER_MESSAGE - 1] + "…"
        return f": {text.rstrip('.')}."


def _retry_reason(exc: openai.APIError, endpoint: str) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"the model provider at {endpoint} timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not reach the model provider at {endpoint}"
    if isinstance(exc, openai.RateLimitError):
        return "rate-limited by the provider"
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else "?"
    return f"the model provider is unavailable (HTTP {status})"


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The server's requested wait, from ``retry-after-ms`` or ``retry-after`` (seconds)."""
    headers = exc.response.headers
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: rare from model APIs; fall back to our own backoff
        if seconds >= 0:
            return seconds
    return None


@dataclass(frozen=True, slots=True)
class _Request:
    messages: Sequence[Message]
    stop: Sequence[str]
    tools: Sequence[ToolSpec] | None
    response_format: ResponseFormat | None


class ReplyReader:
    """One reply's reads into ``ModelChunk``s: each read gives its pieces, whether the reply
    ended (``[DONE]``) and what failed in it, after the pieces that came before the failure
    (they are the reply's too: a stream cut by an error event still shows its text).

    The chunks of plain text in a row within one read come as one piece: a read carries
    what came since the last (``AiohttpTransport``'s ``read_every``: about five chunks), and
    the run's parser, trace and live message then run once for them, not once a chunk.
    Text is text however it is cut: the parser reads any split the same way."""

    __slots__ = ("_feed", "_request", "_text_of", "_translate", "reply")

    def __init__(self, reply: Reply, decoder: SSEDecoder, request: httpx2.Request) -> None:
        self.reply = reply
        self._translate, self._text_of = reply.translate, reply.text_of
        self._feed, self._request = decoder.feed, request

    def __call__(self, raw: bytes) -> tuple[list[ModelChunk], bool, Exception | None]:
        pieces: list[ModelChunk] = []
        text: list[str] = []  # the plain text since the last other piece
        try:
            for event, data in self._feed(raw):
                if event or data.startswith("[DONE]"):
                    if data.startswith("[DONE]"):
                        return _joined(pieces, text), True, None
                    _raise_error_event(event, data, self._request)
                chunk = parse_json(data)
                if type(chunk) is dict and "error" in chunk:
                    _raise_error_event(event, data, self._request)
                content = self._text_of(chunk)
                if content is not None:
                    text.append(content)
                    continue
                translated = self._translate(chunk)
                if translated:
                    _joined(pieces, text)
                    text = []
                    pieces += translated
        except (openai.APIError, ValueError, RecursionError) as exc:
            return _joined(pieces, text), False, exc
        return _joined(pieces, text), False, None


def _joined(pieces: list[ModelChunk], text: list[str]) -> list[ModelChunk]:
    """``pieces``, then ``text`` as one piece."""
    if text:
        pieces.append(ModelChunk(text[0] if len(text) == 1 else "".join(text)))
    return pieces


def _body_of(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The response's bytes as they arrive. Unencoded (as providers send a stream), straight
    from the transport's stream: ``aiter_bytes`` adds a generator, a decoder and a chunker
    to every read, to undo an encoding that is not there."""
    if response.headers.get("content-encoding", "identity") == "identity":
        return aiter(cast(AsyncIterator[bytes], response.stream))
    return response.aiter_bytes()


async def _drain(body: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (nothing, from a well-behaved server) so an HTTP/1.1
    connection can be used again, for a moment at most, as the SDK does."""
    with contextlib.suppress(TimeoutError, httpx2.RequestError, ssl.SSLError, anyio.EndOfStream):
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in body:
                pass


def _raise_error_event(event: str, data: str, request: httpx2.Request) -> None:
    """Raise the provider's error reported inside the stream (``event: error``, or a chunk
    ``{"error": ...}`` as OpenRouter and vLLM send once the 200 status is out), as the SDK
    raises it: ``openai.APIError`` with the error as its body. Other named events pass."""
    try:
        payload: Any = json.loads(data)
    except ValueError:
        payload = data  # an error event's data may be plain words
    error = payload.get("error", payload) if type(payload) is dict else payload
    if event != "error" and not (type(payload) is dict and payload.get("error")):
        return
    message = error.get("message") if type(error) is dict else error
    if not isinstance(message, str) or not message:
        message = "An error occurred during streaming"
    raise openai.APIError(message, request, body=error)


def _names_response_format(exc: openai.APIStatusError) -> bool:
    text = str(exc.body or exc.message).lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object"))


class EncodedHistories:
    """The JSON of the histories this model was sent lately, one per run, so that each step
    of a run encodes only the messages it added.

    A run keeps one list of messages and appends to it step after step (``core.agent``);
    the list is known by its identity (held here, so no other list can take its id while
    it is remembered) and each message by its own: the messages still at the head of the
    list, the same objects as last time, keep their JSON; from the first that differs on,
    all are encoded again. Messages are never changed in place once sent (a run that
    rewrites one puts a new dict in its place), which is what makes identity enough.
    The ``limit`` most recent runs are remembered: with more concurrent runs than that,
    the oldest encode their whole history again, which is only slower.

    A run that ended is forgotten at the next encode: its list is then held by nothing but
    this cache (CPython's reference count says so), and every entry that is so is dropped,
    wherever it is in the order (a run waiting long on an approval keeps no ended run behind
    it; at most ``limit`` entries are looked at an encode). Kept to ``limit``, ended runs
    held each one's whole history and its JSON (tens of KB a run, ~10 MB at 256) whatever the concurrency: the soak's RSS
    grew by that until the cache was full (issue 46)."""

    def __init__(self, *, limit: int = 256) -> None:
        self._limit = limit
        self._runs: OrderedDict[int, _EncodedRun] = OrderedDict()

    def __len__(self) -> int:
        return len(self._runs)

    def _forget_ended(self) -> None:
        """Drop every run whose list nobody else holds (ended runs), wherever it is in the
        order: a run waiting long on an approval must not keep the ended ones behind it."""
        runs = self._runs
        # Two references: the entry's own and getrefcount's argument.
        ended = [k for k, run in runs.items() if sys.getrefcount(run.messages) <= _HELD_ONLY_HERE]
        for key in ended:
            del runs[key]

    def encode(self, messages: Sequence[Message]) -> str:
        key = id(messages)
        run = self._runs.pop(key, None)
        if run is None or run.messages is not messages:
            run = _EncodedRun(messages)
        sent, parts = run.sent, run.parts
        same, most = 0, min(len(sent), len(messages))
        while same < most and sent[same] is messages[same]:
            same += 1
        del sent[same:], parts[same:]
        for message in messages[same:]:
            sent.append(message)
            parts.append(json.dumps(wire_message(message), ensure_ascii=False))
        self._runs[key] = run
        self._forget_ended()
        if len(self._runs) > self._limit:
            self._runs.popitem(last=False)
        return f"[{','.join(parts)}]"


_HELD_ONLY_HERE = 2


@dataclass(slots=True)
class _EncodedRun:
    messages: Sequence[Message]
    sent: list[Message] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages as the API takes them: a message with ``images`` becomes content parts,
    its text first, then one ``image_url`` part per image."""
    return [wire_message(message) for message in messages]


def wire_message(message: Message) -> dict[str, Any]:
    images = message.get("images")
    if not images:
        return dict(message)
    parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    plain = {k: v for k, v in message.items() if k != "images"}
    return {**plain, "content": parts}
