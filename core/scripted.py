"""A strict scripted ChatModel for tests (and benchmarks).

Each call to ``stream`` consumes the next scripted turn and records the messages it was given.
A call with the script exhausted fails loudly; ``assert_complete()`` fails when turns are left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from core.errors import ModelError
from core.llm import Message, ModelChunk, ResponseFormat, ToolCallDelta, ToolSpec, Usage


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted reply: text streamed in ``chunk_size`` pieces, then optional usage.

    ``stall_after`` (chunks) makes the stream hang forever after that many chunks;
    ``error`` is raised before anything is yielded (or after ``stall_after`` chunks).
    ``ignore_stop`` streams the text past a stop sequence, like providers that ignore ``stop``.
    ``tool_calls`` are native calls ``(name, arguments JSON)``, streamed after the text the way
    providers do: id and name first, the arguments in ``chunk_size`` pieces.
    """

    text: str = ""
    chunk_size: int = 8
    usage: Usage | None = None
    reasoning: str = ""
    delay: float = 0.0
    stall_after: int | None = None
    error: ModelError | None = None
    ignore_stop: bool = False
    tool_calls: tuple[tuple[str, str], ...] = ()
    finish: str | None = None


@dataclass(frozen=True, slots=True)
class Call:
    messages: list[Message]
    stop: list[str]
    tools: list[ToolSpec] | None = None
    response_format: ResponseFormat | None = None


@dataclass
class ScriptedModel:
    turns: list[Turn | str]
    model_name: str = "scripted"
    calls: list[Call] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.model_name

    def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncIterator[ModelChunk]:
        copied = [Message(**m) for m in messages]
        self.calls.append(Call(copied, list(stop), list(tools) if tools else None, response_format))
        index = len(self.calls) - 1
        if index >= len(self.turns):
            raise AssertionError(
                f"ScriptedModel called {index + 1} times but only {len(self.turns)} turns scripted;"
                f" last user message: {messages[-1]['content'][:200]!r}"
            )
        turn = self.turns[index]
        return self._play(turn if isinstance(turn, Turn) else Turn(turn), stop)

    async def _play(self, turn: Turn, stop: Sequence[str]) -> AsyncIterator[ModelChunk]:
        text = turn.text if turn.ignore_stop else _cut_at_stop(turn.text, stop)
        if turn.error is not None and turn.stall_after is None:
            raise turn.error
        if turn.reasoning:
            yield ModelChunk(reasoning=turn.reasoning)
        size = max(1, turn.chunk_size)
        pieces = [text[start : start + size] for start in range(0, len(text), size)]
        if turn.stall_after is None and not turn.delay:  # the common case, kept lean
            for piece in pieces:
                yield ModelChunk(piece)
        else:
            for n, piece in enumerate(pieces):
                if turn.stall_after is not None and n >= turn.stall_after:
                    if turn.error is not None:
                        raise turn.error
                    await asyncio.Event().wait()  # hang like a stalled socket
                if turn.delay:
                    await asyncio.sleep(turn.delay)
                yield ModelChunk(piece)
        for index, (name, arguments) in enumerate(turn.tool_calls):
            yield ModelChunk(tool_calls=(ToolCallDelta(index, f"call_{index}", name),))
            for start in range(0, len(arguments), size):
                piece = arguments[start : start + size]
                yield ModelChunk(tool_calls=(ToolCallDelta(index, arguments=piece),))
        if turn.finish is not None:
            yield ModelChunk(finish=turn.finish)
        if turn.usage is not None:
            yield ModelChunk(usage=turn.usage)

    @property
    def remaining(self) -> int:
        return len(self.turns) - len(self.calls)

    def assert_complete(self) -> None:
        if self.remaining:
            raise AssertionError(f"{self.remaining} scripted turn(s) were never used")


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cut = len(text)
    for marker in stop:
        at = text.find(marker)
        if at != -1:
            cut = min(cut, at)
    return text[:cut]
