"""What a tool is: the ``Tool`` protocol, its result and hints, and ``FunctionTool``.

A leaf of ``core.tools`` (which re-exports every name): ``core.tools.schema`` checks a
tool's schema against this protocol, and the registry in ``core.tools`` uses that check, so
the protocol lives here for both to import without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Attachment",
    "FunctionTool",
    "Tool",
    "ToolHints",
    "ToolResult",
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


@dataclass(frozen=True, slots=True)
class ToolDisplay:
    """How people see a tool at work in a live message: ``("🔎", "Searching")``. A tool
    without one shows as ``🛠️ Running <name>`` (``adapters.words.acting``)."""

    emoji: str
    verb: str


@runtime_checkable
class Tool(Protocol):
    """``run`` receives one string: the input itself, or, for a tool that declares a
    ``parameters`` schema (an optional attribute), its checked arguments as JSON text.

    Optional attributes: ``input_name`` (a one-string tool's input in the native modes),
    ``hints`` (``ToolHints``), ``approval`` (True/False: an operator's explicit word on
    whether it needs approval, over the hints), ``remember`` (False: a person's "always" is
    never kept for it, each action is approved on its own), ``source`` ("built-in",
    "mcp:github", ...) and ``display`` (``ToolDisplay``).
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
    display: ToolDisplay | None = None

    async def run(self, arg: str) -> str | ToolResult:
        if self.parameters is None:
            return await self.func(arg)
        arguments = json.loads(arg) if arg.strip() else {}
        return await self.func(**arguments)


def source_of(tool: Tool) -> str:
    source = getattr(tool, "source", None)
    return source if isinstance(source, str) and source else "built-in"


def display_of(tool: Tool | None) -> ToolDisplay | None:
    display = getattr(tool, "display", None)
    return display if isinstance(display, ToolDisplay) else None


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
