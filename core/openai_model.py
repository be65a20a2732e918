"""``OpenAIChatModel``: the ChatModel for any OpenAI-compatible endpoint, via the ``openai`` SDK.

Works with OpenAI, DeepSeek, Qwen/DashScope, vLLM, OpenRouter, Ollama and llama.cpp server.
What it adds on top of the SDK:

- its own bounded retries (the SDK's are off), only before the first chunk reached the caller,
  so a retry can never duplicate text; a ``ModelChunk(notice=...)`` precedes each wait;
- reasoning text, from ``delta.reasoning_content`` / ``delta.reasoning`` or from
  ``<think>...</think>`` inside the content, yielded as ``ModelChunk(reasoning=...)``;
- a refusal (``delta.refusal``) as ``ModelChunk(refusal=...)``;
- one ``ModelChunk(usage=...)`` at the end, when the provider reports usage;
- a fallback for providers that reject ``stream_options``;
- every SDK error mapped to ``core.errors`` with a message fit for a chat, with the key redacted.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import openai
from openai import AsyncOpenAI, AsyncStream, omit
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)
from openai.types.chat.chat_completion_chunk import ChoiceDelta

from core.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
    ResponseFormatRefused,
)
from core.llm import Message, ModelChunk, ResponseFormat, ToolCallDelta, ToolSpec, Usage

__all__ = ["OpenAIChatModel", "ThinkSplitter"]

# Local servers (Ollama, llama.cpp) ignore the key, but the SDK refuses to run without one.
_PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"
"""Where the SDK sends requests when no ``base_url`` is given."""
# A server asking us to wait longer than this is better answered with an error the user sees
# than with a chat that silently hangs.
_MAX_RETRY_AFTER = 30.0
_MAX_BACKOFF = 30.0
_MAX_PROVIDER_MESSAGE = 300
_RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Key-looking strings a provider might echo back (OpenAI echoes a masked key on 401).
_SECRET_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}|Bearer\s+\S+", re.IGNORECASE)


class OpenAIChatModel:
    """Streams chat completions from an OpenAI-compatible endpoint.

    The SDK client is created on first use (no I/O in the constructor) and closed by
    ``aclose()``. One instance may serve many concurrent ``stream`` calls.
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
        self._client: AsyncOpenAI | None = None
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
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            started = False
            try:
                # One request, start to end, read here rather than through a generator of its
                # own: every chunk passes this loop, and each generator layer costs per chunk.
                response = await self._create(_Request(messages, stop, tools, response_format))
                reply = _Reply()
                translate = reply.translate
                async with response:
                    try:
                        async for chunk in response:
                            for piece in translate(chunk):
                                started = True
                                yield piece
                    except json.JSONDecodeError as exc:
                        raise ModelUnavailable(
                            f"The model provider at {self.endpoint} sent a malformed stream."
                        ) from exc
                for piece in reply.close():
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

    async def _create(self, request: _Request) -> AsyncStream[ChatCompletionChunk]:
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

    async def _request(self, request: _Request) -> AsyncStream[ChatCompletionChunk]:
        limit = self._max_tokens if self._max_tokens is not None else omit
        completion_limit = self._token_limit_name == "max_completion_tokens"
        tools, response_format = request.tools, request.response_format
        return await self._get_client().chat.completions.create(
            model=self._model,
            # Message is a subset of the SDK's message union; TypedDicts do not widen by themselves.
            messages=cast(list[ChatCompletionMessageParam], wire_messages(request.messages)),
            stream=True,
            stop=list(request.stop) if request.stop else omit,
            stream_options={"include_usage": True} if self._send_stream_options else omit,
            temperature=self._temperature if self._temperature is not None else omit,
            tools=cast(list[ChatCompletionToolUnionParam], list(tools)) if tools else omit,
            tool_choice="auto" if tools else omit,
            response_format=cast(Any, response_format) if response_format else omit,
            max_tokens=omit if completion_limit else limit,
            max_completion_tokens=limit if completion_limit else omit,
            extra_body=self._extra_body,
        )

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            self._client = AsyncOpenAI(
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


# -- chunk translation ---------------------------------------------------------------------


class _Reply:
    """One reply's chunks as ``ModelChunk``s; only chunks that carry something come out.

    Usage comes once, at the end (some servers repeat a cumulative figure on every chunk:
    the last one counts). The reply's id and model go on the first piece that carries
    anything: a chunk of its own would count as the reply begun, and end the retries before
    any text."""

    __slots__ = ("_meta", "_named", "_splitter", "_usage")

    def __init__(self) -> None:
        self._splitter = ThinkSplitter()
        self._usage: Usage | None = None
        self._named = False
        self._meta: tuple[str, str] | None = None

    def translate(self, chunk: ChatCompletionChunk) -> list[ModelChunk]:
        if not self._named and self._meta is None and (chunk.id or chunk.model):
            self._meta = (chunk.id or "", chunk.model or "")
        if chunk.usage:
            self._usage = _usage(chunk.usage)
        choices = chunk.choices
        if not choices:
            return []
        choice = choices[0]  # we never ask for n > 1
        delta = choice.delta
        content = delta.content
        if (  # the commonest chunk by far: a piece of text and nothing else
            content
            and choice.finish_reason is None
            and not delta.tool_calls
            and not delta.refusal
            and not delta.__pydantic_extra__
        ):
            splitter = self._splitter
            if splitter.idle and "<" not in content:  # no <think> tag can begin here
                pieces = [ModelChunk(content)]
            else:
                pieces = splitter.feed(content)
        else:
            pieces = []
            reasoning = _reasoning(delta)
            if reasoning:
                pieces.append(ModelChunk(reasoning=reasoning))
            if content:
                pieces.extend(self._splitter.feed(content))
            if delta.refusal:
                pieces.append(ModelChunk(refusal=delta.refusal))
            if delta.tool_calls:
                pieces.append(
                    ModelChunk(tool_calls=tuple(_tool_call(call) for call in delta.tool_calls))
                )
            if choice.finish_reason:
                pieces.append(ModelChunk(finish=choice.finish_reason))
        if self._meta is not None and pieces:
            pieces[0].response_id, pieces[0].response_model = self._meta
            self._meta, self._named = None, True
        return pieces

    def close(self) -> list[ModelChunk]:
        """What the reply's end completes: text held back by the splitter, then the usage."""
        pieces = self._splitter.close()
        if self._usage is not None:
            pieces.append(ModelChunk(usage=self._usage))
        if self._meta is not None:
            pieces = pieces or [ModelChunk()]
            pieces[0].response_id, pieces[0].response_model = self._meta
        return pieces


@dataclass(frozen=True, slots=True)
class _Request:
    messages: Sequence[Message]
    stop: Sequence[str]
    tools: Sequence[ToolSpec] | None
    response_format: ResponseFormat | None


def _names_response_format(exc: openai.APIStatusError) -> bool:
    text = str(exc.body or exc.message).lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object"))


def _reasoning(delta: ChoiceDelta) -> str:
    # Not in the SDK's types: DeepSeek/Qwen send ``reasoning_content``, vLLM/OpenRouter
    # ``reasoning``; the SDK keeps unknown fields in ``model_extra``.
    extra = delta.model_extra or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _tool_call(call: Any) -> ToolCallDelta:
    function = call.function
    return ToolCallDelta(
        index=call.index,
        id=call.id,
        name=function.name if function else None,
        arguments=(function.arguments or "") if function else "",
    )


def _usage(usage: CompletionUsage) -> Usage:
    details = usage.prompt_tokens_details
    cached = details.cached_tokens if details and details.cached_tokens else 0
    if not cached:
        # DeepSeek reports cache hits in its own field.
        hit = (usage.model_extra or {}).get("prompt_cache_hit_tokens")
        cached = hit if isinstance(hit, int) else 0
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=cached,
    )


class ThinkSplitter:
    """Moves ``<think>...</think>`` spans of streamed content into reasoning chunks.

    Pure (no I/O, no clock): ``feed(text)`` returns the chunks the text completes and
    ``close()`` flushes the rest. A tag may straddle chunks, so a tail that could be the start
    of a tag is held back until the next feed decides it.
    """

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self.idle = True
        """Outside any ``<think>`` span with nothing held back: text with no ``<`` in it is
        plain content as it stands (the check the caller makes for nearly every chunk)."""

    def feed(self, text: str) -> list[ModelChunk]:
        pieces = self._feed(text)
        self.idle = not self._buffer and not self._inside
        return pieces

    def _feed(self, text: str) -> list[ModelChunk]:
        self._buffer += text
        pieces: list[ModelChunk] = []
        while True:
            tag = self._CLOSE if self._inside else self._OPEN
            index = self._buffer.find(tag)
            if index < 0:
                break
            self._emit(pieces, self._buffer[:index])
            self._buffer = self._buffer[index + len(tag) :]
            self._inside = not self._inside
        keep = _partial_tag_length(self._buffer, tag)
        self._emit(pieces, self._buffer[: len(self._buffer) - keep])
        self._buffer = self._buffer[len(self._buffer) - keep :]
        return pieces

    def close(self) -> list[ModelChunk]:
        """Flush what was held back; an unterminated ``<think>`` stays reasoning."""
        pieces: list[ModelChunk] = []
        self._emit(pieces, self._buffer)
        self._buffer = ""
        self.idle = not self._inside
        return pieces

    def _emit(self, pieces: list[ModelChunk], text: str) -> None:
        if text:
            pieces.append(ModelChunk(reasoning=text) if self._inside else ModelChunk(text=text))


def _partial_tag_length(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:length]):
            return length
    return 0


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages as the API takes them: a message with ``images`` becomes content parts,
    its text first, then one ``image_url`` part per image."""
    wired: list[dict[str, Any]] = []
    for message in messages:
        images = message.get("images")
        if not images:
            wired.append(dict(message))
            continue
        parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
        plain = {k: v for k, v in message.items() if k != "images"}
        wired.append({**plain, "content": parts})
    return wired
