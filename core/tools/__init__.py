"""Tools: the protocol, a registry, and the errors a tool raises.

Adding a tool is one function plus one registry line::

    async def word_count(arg: str) -> str:
        return str(len(arg.split()))

    registry.add(FunctionTool("word_count", word_count,
                              description="Counts the words in a text.",
                              example="word_count[the quick brown fox]"))

A tool with several arguments declares their JSON schema, and its function takes them by
name (checked against the schema before it runs; see ``core.tools.schema``)::

    async def convert(amount: float, unit: str) -> str: ...

    registry.add(FunctionTool("convert", convert, "Converts units.",
                              'convert[{"amount": 3, "unit": "km"}]',
                              parameters={"type": "object", "properties": {
                                  "amount": {"type": "number"}, "unit": {"type": "string"}},
                                  "required": ["amount", "unit"]}))
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from core.errors import ToolError, ToolTimeout

__all__ = ["FunctionTool", "Tool", "ToolError", "ToolRegistry", "ToolResult", "ToolTimeout"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns when it has more than text to give: sources for the trace."""

    text: str
    sources: tuple[str, ...] = ()


@runtime_checkable
class Tool(Protocol):
    """``run`` receives one string: the input itself, or, for a tool that declares a
    ``parameters`` schema (an optional attribute), its checked arguments as JSON text.
    An optional ``input_name`` names a one-string tool's input in the native modes."""

    name: str
    description: str
    example: str

    async def run(self, arg: str) -> str | ToolResult: ...


@dataclass(slots=True)
class FunctionTool:
    """Wraps ``async def f(arg) -> str | ToolResult`` as a Tool; with ``parameters`` (a JSON
    schema of an object), ``f(**arguments)`` instead."""

    name: str
    func: Callable[..., Awaitable[str | ToolResult]]
    description: str
    example: str
    parameters: dict[str, Any] | None = None
    input_name: str = "input"

    async def run(self, arg: str) -> str | ToolResult:
        if self.parameters is None:
            return await self.func(arg)
        arguments = json.loads(arg) if arg.strip() else {}
        return await self.func(**arguments)


@dataclass(slots=True)
class ToolRegistry:
    """Tools by lower-cased name; lookup is case-insensitive (models write ``Search[...]``)."""

    _tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
        from core.tools.schema import check_schema  # the schema module imports this one

        key = tool.name.lower()
        if key in self._tools or key == "finish":
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        check_schema(tool)
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
