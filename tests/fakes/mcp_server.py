"""A real MCP server, written with the SDK (``MCPServer``), for the tests: run it over stdio
(``python -m tests.fakes.mcp_server``) or Streamable HTTP (``... http PORT``).

Its tools cover what reactbot must handle: several arguments, an error result, a protocol
error, an image, a
slow call that records being cancelled, a tool that adds a tool and says the list changed,
structured content, a resource link, its own pid and environment (to kill it and to check
what a child is given). Nothing here is a mock of the client.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, ResourceLink, TextContent, ToolAnnotations

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # 1,032 bytes: "1.0 KB"

server = MCPServer("demo", log_level="WARNING")
cancelled: list[float] = []

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int, note: str = "") -> str:
    """Adds two whole numbers.

    A second paragraph the text-mode prompt leaves out."""
    return f"{a + b}{f' ({note})' if note else ''}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_note(path: str) -> str:
    """Deletes a note."""
    return f"deleted {path}"


@server.tool()
def fail(reason: str) -> str:
    """Fails on purpose with the reason given."""
    raise ToolError(f"could not do it: {reason}")


@server.tool(annotations=READ_ONLY)
def refuse() -> str:
    """Answers with a protocol error, not an error result."""
    raise MCPError(INVALID_PARAMS, "refused: the moon is not full")


@server.tool(annotations=READ_ONLY)
def image() -> Image:
    """Draws a picture."""
    return Image(data=PNG, format="png")


@server.tool(annotations=READ_ONLY)
async def slow(seconds: float) -> str:
    """Sleeps, then says done."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cancelled.append(seconds)
        raise
    return "done"


@server.tool(annotations=READ_ONLY)
def stats() -> str:
    """How many slow calls were cancelled."""
    return json.dumps({"cancelled": len(cancelled)})


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool(annotations=READ_ONLY)
def environment() -> str:
    """The names of this process's environment variables, and DEMO_TOKEN's value."""
    return json.dumps({"names": sorted(os.environ), "DEMO_TOKEN": os.environ.get("DEMO_TOKEN")})


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and says that the tool list changed."""
    server.add_tool(lambda: "extra!", name="extra", description="Added later.")
    await ctx.notify_tools_changed()  # 2026 connections: to the listen stream
    await ctx.request_context.session.send_tool_list_changed()  # earlier ones: unasked
    return "grown"


@server.tool(annotations=READ_ONLY)
def measure(x: int) -> CallToolResult:
    """Structured content, with its JSON as text (as the spec asks servers to do)."""
    data = {"x": x, "double": 2 * x, "name": "mesure"}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, indent=2))],
        structured_content=data,
    )


@server.tool(annotations=READ_ONLY)
def readme() -> CallToolResult:
    """A resource link."""
    link = ResourceLink(
        type="resource_link", name="README.md", uri="https://example.com/demo/README.md"
    )
    return CallToolResult(content=[TextContent(type="text", text="See the README."), link])


def main(argv: list[str]) -> None:
    if argv[:1] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
