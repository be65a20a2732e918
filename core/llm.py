"""The ChatModel seam: one streaming method, the messages it reads and the chunks it yields.

Implementations: ``core.openai_model.OpenAIChatModel`` (any OpenAI-compatible endpoint),
``core.scripted.ScriptedModel`` (strict, for tests) and ``core.demo.DemoModel`` (offline demo).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable


class ToolCallFunction(TypedDict):
    name: str
    arguments: str
    """JSON text, as the model wrote it."""


class ToolCallMessage(TypedDict):
    """One native tool call inside an assistant message (OpenAI's shape)."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class Message(TypedDict):
    """One chat message. ``tool_calls`` only on an assistant message in ``tools`` mode, and
    ``tool_call_id`` only on the ``tool`` message that answers one of them."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: NotRequired[list[ToolCallMessage]]
    tool_call_id: NotRequired[str]
    images: NotRequired[list[str]]
    """On the question, for a model that reads images: ``data:`` URLs of the attached images
    (a model client sends them as image parts of that message; others ignore them)."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a native tool call: id and name usually come first, arguments in pieces;
    several calls in one reply are told apart by ``index``."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class ModelChunk:
    """One piece of a streamed reply. Every field is optional; most chunks carry only text.

    Not frozen, though nothing changes one after it is made: a model yields one per streamed
    piece, and a frozen dataclass of seven fields costs four times as much to build
    (1.2 µs against 0.3), a third of the loop's whole per-chunk budget.

    ``reasoning`` is text from models that return ``reasoning_content`` separately.
    ``notice`` tells the user what the transport is doing (e.g. retrying after a 429);
    it is never part of the model's reply. ``pause`` is how long the transport is about to
    wait on purpose (a retry back-off), so a stall detector does not count it as silence.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    usage: Usage | None = None
    notice: str | None = None
    pause: float = 0.0
    finish: str | None = None
    """Why the reply ended, when the provider says (``stop``, ``tool_calls``, ``length``)."""
    refusal: str = ""
    """The model declining to answer, in its own words (OpenAI's ``delta.refusal``, sent with
    no content): it is the reply's answer, never a reply to re-ask."""
    response_id: str = ""
    response_model: str = ""
    """The provider's id of the reply and the model that wrote it (which may name a version of
    the model asked for), on the first chunk that carries anything; for telemetry."""


async def stream_text(
    text: str, *, size: int, delay: float = 0.0, usage: Usage | None = None
) -> AsyncIterator[ModelChunk]:
    """``text`` as a stream of ``size``-character chunks, ``delay`` seconds apart, then
    ``usage``: how the offline demo and the benchmark models speak."""
    size = max(1, size)
    for start in range(0, len(text), size):
        if delay:
            await asyncio.sleep(delay)
        yield ModelChunk(text=text[start : start + size])
    if usage is not None:
        yield ModelChunk(usage=usage)


ToolSpec = dict[str, Any]
"""A JSON-schema function description, for the native tool-calling mode."""

ResponseFormat = dict[str, Any]
"""OpenAI's ``response_format`` (``json_schema`` or ``json_object``), for the ``json`` mode."""


@runtime_checkable
class Sampled(Protocol):
    """A model that knows the sampling settings it sends (``OpenAIChatModel``): telemetry
    reports them as the request's."""

    @property
    def temperature(self) -> float | None: ...

    @property
    def max_tokens(self) -> int | None: ...


class ChatModel(Protocol):
    """Streams one reply. Raises ``core.errors.ModelError`` subclasses, nothing else."""

    @property
    def name(self) -> str: ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncIterator[ModelChunk]: ...
