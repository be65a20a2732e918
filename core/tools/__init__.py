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

__all__ = [
    "Attachment",
    "FunctionTool",
    "Tool",
    "ToolError",
    "ToolHints",
    "ToolRegistry",
    "ToolResult",
    "ToolTimeout",
    "needs_approval",
    "source_of",
]


@dataclass(frozen=True, slots=True)
class Attachment:
    """Bytes a tool returned besides its text (an image, audio): the model sees a short
    placeholder in the text; these are what a trace would keep."""

    mime_type: str
    data: str
    """Base64, as the tool sent it."""
    name: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns when it has more than text to give: sources for the trace, and
    attachments (bytes the text only describes)."""

    text: str
    sources: tuple[str, ...] = ()
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolHints:
    """What a tool says about itself (MCP's tool annotations, with MCP's defaults: a tool
    that says nothing may change things and reach the outside world). A tool that is not
    read-only needs a person's approval by default; see ``needs_approval``."""

    read_only: bool = False
    destructive: bool = True
    open_world: bool = True
    title: str | None = None


@runtime_checkable
class Tool(Protocol):
    """``run`` receives one string: the input itself, or, for a tool that declares a
    ``parameters`` schema (an optional attribute), its checked arguments as JSON text.

    Optional attributes: ``input_name`` (a one-string tool's input in the native modes),
    ``hints`` (``ToolHints``), ``approval`` (True/False: an operator's explicit word on
    whether it needs approval, over the hints) and ``source`` ("built-in", "mcp:github", ...).
    """

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
    hints: ToolHints | None = None
    approval: bool | None = None
    source: str = "built-in"

    async def run(self, arg: str) -> str | ToolResult:
        if self.parameters is None:
            return await self.func(arg)
        arguments = json.loads(arg) if arg.strip() else {}
        return await self.func(**arguments)


def source_of(tool: Tool) -> str:
    source = getattr(tool, "source", None)
    return source if isinstance(source, str) and source else "built-in"


def needs_approval(tool: Tool, listed: frozenset[str] = frozenset()) -> bool:
    """Whether a person must approve each run of ``tool``: it is ``listed`` (the operator's
    ``agent.approval.tools``), or its own ``approval`` says so, or, saying nothing, its
    hints do not call it read-only. A tool with neither (the built-ins) runs freely."""
    if tool.name.lower() in listed:
        return True
    explicit = getattr(tool, "approval", None)
    if isinstance(explicit, bool):
        return explicit
    hints = getattr(tool, "hints", None)
    return isinstance(hints, ToolHints) and not hints.read_only


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

    def remove(self, name: str) -> None:
        """Forget a tool (an MCP server stopped offering it); unknown names are ignored."""
        self._tools.pop(name.strip().lower(), None)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
