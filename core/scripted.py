"""A strict scripted ChatModel for tests (and benchmarks).

Each call to ``stream`` consumes the next scripted turn and records the messages it was given.
A call with the script exhausted fails loudly; ``assert_complete()`` fails when turns are left.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from core.errors import ModelError
from core.history import Message
from core.llm import ModelChunk, ToolSpec, Usage


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted reply: text streamed in ``chunk_size`` pieces, then optional usage.

    ``stall_after`` (chunks) makes the stream hang forever after that many chunks;
    ``error`` is raised before anything is yielded (or after ``stall_after`` chunks).
    ``ignore_stop`` streams the text past a stop sequence, like providers that ignore ``stop``.
    """

    text: str = ""
    chunk_size: int = 8
    usage: Usage | None = None
    reasoning: str = ""
    delay: float = 0.0
    stall_after: int | None = None
    error: ModelError | None = None
    ignore_stop: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    messages: list[Message]
    stop: list[str]


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
    ) -> AsyncIterator[ModelChunk]:
        self.calls.append(
            Call([Message(role=m["role"], content=m["content"]) for m in messages], list(stop))
        )
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
        for n, start in enumerate(range(0, len(text), size)):
            if turn.stall_after is not None and n >= turn.stall_after:
                if turn.error is not None:
                    raise turn.error
                await asyncio.Event().wait()  # hang like a stalled socket
            if turn.delay:
                await asyncio.sleep(turn.delay)
            yield ModelChunk(text=text[start : start + size])
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
