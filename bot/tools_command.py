"""``reactbot tools``: every tool the model may call, where it comes from, its input in one
line and whether a person must approve each run; then the MCP servers and their state, and
what ``lookup`` searches (each source with its passage count).

A plain function from the registry and the servers' state to text; the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.config import MCPServerConfig
from core.knowledge import SourceCount
from core.tools import Tool, ToolHints, needs_approval, source_of
from core.tools.schema import compact_schema, schema_of

HEADERS = ("TOOL", "SOURCE", "APPROVAL", "HINTS", "INPUT")
MAX_COLUMN = 40
MAX_INPUT = 300


@dataclass(frozen=True, slots=True)
class ServerLine:
    name: str
    transport: str
    state: str
    """``up``, ``starting``, ``down`` (restarting), ``failed`` (did not start), ``disabled``."""
    reason: str | None = None
    tools: int = 0

    @property
    def working(self) -> bool:
        return self.state in ("up", "disabled")


def server_lines(
    configured: Sequence[MCPServerConfig], statuses: Iterable[ServerLine]
) -> list[ServerLine]:
    """Every configured server in the config's order: its state, or ``disabled``."""
    by_name = {s.name: s for s in statuses}
    return [
        by_name.get(server.name) or ServerLine(server.name, server.transport, "disabled")
        for server in configured
    ]


def format_tools(
    tools: Iterable[Tool],
    servers: Sequence[ServerLine],
    *,
    listed: frozenset[str],
    sources: Sequence[SourceCount] | None = None,
) -> str:
    """The tools; what ``lookup`` searches (``sources``, when it is one of them); the MCP
    servers."""
    rows = [
        (
            tool.name,
            source_of(tool),
            "yes" if needs_approval(tool, listed) else "no",
            hints_text(tool),
            _cut(compact_schema(schema_of(tool)), MAX_INPUT),
        )
        for tool in tools
    ]
    lines = _table([HEADERS, *rows]) if rows else ["No tools: every tool is switched off."]
    if sources is not None:
        lines.append(format_sources(sources))
    if servers:
        lines += ["", *_table([("MCP SERVER", "TRANSPORT", "STATE"), *map(_server_row, servers)])]
    return "\n".join(lines)


def format_sources(sources: Sequence[SourceCount]) -> str:
    """What ``lookup`` searches: each folder and the shipped manual with its passages and
    when it is searched; a conversation's own files come first whenever they match."""
    rows = [(source.name, source.kind, f"{source.passages:,}", source.when) for source in sources]
    rows.append(("files attached in a conversation", "files", "-", "always, ranked first"))
    return "\n".join(["", *_table([("LOOKUP SOURCE", "KIND", "PASSAGES", "SEARCHED"), *rows])])


def hints_text(tool: Tool) -> str:
    """What a tool says of itself (MCP's annotations): read-only, or destructive or additive;
    open-world when it reaches outside."""
    hints = getattr(tool, "hints", None)
    if not isinstance(hints, ToolHints):
        return "-"
    effect = "read-only" if hints.read_only else "destructive" if hints.destructive else "additive"
    return f"{effect}, open-world" if hints.open_world else effect


def _server_row(server: ServerLine) -> tuple[str, str, str]:
    match server.state:
        case "up":
            state = f"up: {server.tools} tool{'s' if server.tools != 1 else ''}"
        case "failed":
            state = f"did not start: {server.reason}"
        case "down":
            state = f"down, restarting: {server.reason}"
        case "disabled":
            state = "disabled (enabled: false)"
        case _:
            state = server.state
    return server.name, server.transport, state


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell (at most MAX_COLUMN); the last one as it is."""
    widths = [min(MAX_COLUMN, max(len(row[i]) for row in rows)) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
