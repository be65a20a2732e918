"""Tools: the protocol, a registry, and the errors a tool raises.

Adding a tool is one function plus one registry line::

    async def word_count(arg: str) -> str:
        return str(len(arg.split()))

    registry.add(FunctionTool("word_count", word_count,
                              description="Counts the words in a text.",
                              example="word_count[the quick brown fox]"))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from core.errors import ToolError, ToolTimeout

__all__ = ["FunctionTool", "Tool", "ToolError", "ToolRegistry", "ToolResult", "ToolTimeout"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns when it has more than text to give: sources for the trace."""

    text: str
    sources: tuple[str, ...] = ()


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    example: str

    async def run(self, arg: str) -> str | ToolResult: ...


@dataclass(slots=True)
class FunctionTool:
    """Wraps an ``async def f(arg) -> str | ToolResult`` as a Tool."""

    name: str
    func: Callable[[str], Awaitable[str | ToolResult]]
    description: str
    example: str

    async def run(self, arg: str) -> str | ToolResult:
        return await self.func(arg)


@dataclass(slots=True)
class ToolRegistry:
    """Tools by lower-cased name; lookup is case-insensitive (models write ``Search[...]``)."""

    _tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
        key = tool.name.lower()
        if key in self._tools or key == "finish":
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[key] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name.strip().lower())

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
