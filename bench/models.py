"""A benchmark model: scripted by step, not by call order, so hundreds of concurrent runs
cannot take each other's turns. ``steps`` tool calls, then the answer, streamed in chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from core.llm import Message, ModelChunk, ResponseFormat, ToolSpec, Usage, stream_text

TYPICAL_USAGE = Usage(400, 30)


@dataclass(frozen=True, slots=True)
class StepScriptModel:
    steps: int = 1
    chunks: int = 12
    """Chunks per reply."""
    delay: float = 0.02
    """Seconds before each chunk."""
    action: str = "calculate[6*7]"
    """The tool call of every step; ``{n}`` becomes the step number."""
    usage: Usage = TYPICAL_USAGE

    @property
    def name(self) -> str:
        return "bench-scripted"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncIterator[ModelChunk]:
        done = sum(1 for m in messages if m["role"] == "assistant")
        if done < self.steps:
            action = self.action.format(n=done + 1)
            text = (
                f"Thought: step {done + 1}: a tool knows this better than I do.\nAction: {action}"
            )
        else:
            text = (
                "Thought: I have what I need, so I can answer.\nAction: finish[The answer is 42.]"
            )
        size = -(-len(text) // self.chunks)
        return stream_text(text, size=size, delay=self.delay, usage=self.usage)
