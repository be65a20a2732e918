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

from collections.abc import Iterator
from dataclasses import dataclass, field

from core.errors import ToolError, ToolTimeout
from core.tools.base import (
    Attachment,
    FunctionTool,
    Tool,
    ToolDisplay,
    ToolHints,
    ToolResult,
    display_of,
    needs_approval,
    source_of,
)
from core.tools.schema import check_schema

__all__ = [
    "Attachment",
    "FunctionTool",
    "Tool",
    "ToolDisplay",
    "ToolError",
    "ToolHints",
    "ToolRegistry",
    "ToolResult",
    "ToolTimeout",
    "display_of",
    "needs_approval",
    "source_of",
]


@dataclass(slots=True)
class ToolRegistry:
    """Tools by lower-cased name; lookup is case-insensitive (models write ``Search[...]``)."""

    _tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
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
