"""Tools from Model Context Protocol servers, through the official ``mcp`` SDK (2.x).

Imported only when servers are configured: ``import core`` never loads ``mcp``.

    MCPTools           the servers of one App: starts them, names their tools into the
     │                 ToolRegistry as ``{server}_{tool}``, reports each server's state
     └── _Link         one server: a supervisor task that connects (a command over stdio, or
          │            Streamable HTTP), lists the tools (again on ``tools/list_changed``),
          │            waits until the connection ends, then connects again with backoff
          └── MCPTool  one tool: ``parameters`` is its input schema, ``hints`` its
                       annotations, ``source`` is ``mcp:{server}``; ``run`` is a tools/call

Faults: a server that does not start is reported once and left out; one that dies is
restarted with backoff, and meanwhile its tools answer that it is unavailable (a
``ToolError``, so an Observation); a call past the timeout is cancelled on the server by the
SDK (``notifications/cancelled``; on a 2026 Streamable HTTP connection, the aborted request)
and raised as ``ToolTimeout``.

Results: text joined; structured content as compact JSON; images and audio as a placeholder
with type and size (the bytes ride along as ``ToolResult.attachments``); resource links as
links; ``isError`` as a ``ToolError`` (``core.tools.mcp_results``, with the tool's naming).

The SDK gives no sign that a stdio server has exited except the end of its output, so the
transport's read stream is watched (``EofWatch``, in ``core.tools.mcp_transport`` with the
rest of a connection's plumbing); and a Streamable HTTP transport that fails
cancels the task that opened it, so every connection lives in its own supervisor task and
calls come from other tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from core.errors import ToolError, ToolTimeout
from core.tools import ToolHints, ToolRegistry, ToolResult
from core.tools.mcp_results import (
    MAX_NAME,
    description,
    example_call,
    hints_of,
    render_result,
    safe_name,
)
from core.tools.mcp_transport import Connection, Refused, cancel, leaf, line, watched

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = [
    "HttpServer",
    "MCPTool",
    "MCPTools",
    "ServerSpec",
    "ServerStatus",
    "StdioServer",
    "example_call",
    "hints_of",
    "render_result",
    "safe_name",
]

log = logging.getLogger(__name__)

MAX_PAGES = 100
"""tools/list pages read at most: a server that paginates forever cannot hang the start."""
STABLE_SECONDS = 30.0
"""A connection that lived this long resets the restart backoff."""
CONNECT_TIMEOUT = 60.0
"""Seconds to start a server, connect and list its tools (``npx -y`` may download first)."""


def _version() -> str:
    try:
        return importlib.metadata.version("reactbot")
    except importlib.metadata.PackageNotFoundError:
        return "0"


CLIENT_INFO = types.Implementation(name="reactbot", version=_version())

State = Literal["starting", "up", "down", "failed"]
"""``failed``: never started (left out); ``down``: stopped after starting, being restarted."""


# --------------------------------------------------------------------------------------------
# What the application hands in, and what it reads back


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server run as a child process, spoken to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """The only variables passed on, besides the SDK's own few (PATH, HOME, USER, ...)."""


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server at a Streamable HTTP endpoint."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str
    transport: StdioServer | HttpServer
    allow: frozenset[str] | None = None
    """The server's own tool names to offer; None: all of them."""
    approval: bool | None = None
    """An operator's word on every tool of this server (see ``core.tools.needs_approval``)."""
    problem: str | None = None
    """Known before starting (a variable is not set): the server is reported, never started."""

    @property
    def kind(self) -> Literal["stdio", "http"]:
        return "stdio" if isinstance(self.transport, StdioServer) else "http"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values never to show: the variables passed to the child, the header values."""
        transport = self.transport
        values = transport.env if isinstance(transport, StdioServer) else transport.headers
        return tuple(v for v in values.values() if v)


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    transport: Literal["stdio", "http"]
    state: State
    reason: str | None
    tools: int


# --------------------------------------------------------------------------------------------
# One tool


@dataclass(slots=True)
class MCPTool:
    """A server's tool as a reactbot Tool. ``run`` receives the arguments the agent checked
    against ``parameters`` (canonical JSON) and makes one tools/call."""

    name: str
    description: str
    example: str
    parameters: dict[str, Any]
    hints: ToolHints
    source: str
    remote: str
    """The tool's own name on its server."""
    approval: bool | None
    call: Callable[[str, str, dict[str, Any]], Awaitable[ToolResult]] = field(repr=False)

    async def run(self, arg: str) -> ToolResult:
        arguments = json.loads(arg) if arg.strip() else {}
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name}: the input must be a JSON object")
        return await self.call(self.name, self.remote, arguments)


# --------------------------------------------------------------------------------------------
# All the servers


class MCPTools:
    """The configured servers; their tools live in ``registry`` while they are offered."""

    def __init__(
        self,
        registry: ToolRegistry,
        servers: Sequence[ServerSpec],
        *,
        timeout: float = 30.0,
        connect_timeout: float = CONNECT_TIMEOUT,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        """``timeout``: per tool call; ``connect_timeout``: per connection, listing included;
        ``backoff``: the first and the longest wait before a restart."""
        self._registry = registry
        self._names: dict[str, dict[str, str]] = {}
        """server -> {its tool's own name -> the name in the registry}"""
        self._links = [
            _Link(
                spec,
                timeout=timeout,
                connect_timeout=connect_timeout,
                backoff=backoff,
                publish=self._publish,
            )
            for spec in servers
        ]

    async def start(self) -> list[str]:
        """Connect every server at once and list its tools. Returns what to tell the operator
        once: the servers that did not start (they are left out; the others work)."""
        await asyncio.gather(*(link.start() for link in self._links))
        return [
            f"MCP server '{link.spec.name}' did not start ({link.reason}); its tools are left out."
            for link in self._links
            if link.state == "failed"
        ]

    def status(self) -> list[ServerStatus]:
        return [link.status() for link in self._links]

    async def aclose(self) -> None:
        await asyncio.gather(*(link.aclose() for link in self._links))

    def _publish(self, spec: ServerSpec, listed: Sequence[types.Tool], link: _Link) -> int:
        """Put what the server offers now into the registry, under the names its tools had
        before where they had one; returns how many were added."""
        before = self._names.pop(spec.name, {})
        for name in before.values():
            self._registry.remove(name)
        now: dict[str, str] = {}
        for tool in listed:
            if spec.allow is not None and tool.name not in spec.allow:
                continue
            kept = before.get(tool.name)
            if kept is None or self._registry.get(kept) is not None:
                kept = self._free_name(spec.name, tool.name)
            try:
                self._registry.add(self._tool(spec, tool, kept, link))
            except ValueError as exc:  # an invalid input schema
                log.warning("MCP server %r: tool %r left out: %s", spec.name, tool.name, exc)
                continue
            now[tool.name] = kept
        self._names[spec.name] = now
        if spec.allow is not None and (absent := sorted(spec.allow - {t.name for t in listed})):
            log.warning(
                "MCP server %r does not offer %s (named in its tools list)",
                spec.name,
                ", ".join(absent),
            )
        return len(now)

    def _free_name(self, server: str, tool: str) -> str:
        base = safe_name(f"{server}_{tool}")
        name, n = base, 1
        while self._registry.get(name) is not None:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        if name != base:
            log.warning(
                "MCP tool name %r is taken: server %r's tool %r is called %r",
                base,
                server,
                tool,
                name,
            )
        return name

    @staticmethod
    def _tool(spec: ServerSpec, tool: types.Tool, name: str, link: _Link) -> MCPTool:
        schema = dict(tool.input_schema)
        return MCPTool(
            name=name,
            description=description(tool),
            example=example_call(name, schema),
            parameters=schema,
            hints=hints_of(tool),
            source=f"mcp:{spec.name}",
            remote=tool.name,
            approval=spec.approval,
            call=link.call,
        )


# --------------------------------------------------------------------------------------------
# One server


Publish = Callable[[ServerSpec, Sequence[types.Tool], "_Link"], int]


class _Link:
    def __init__(
        self,
        spec: ServerSpec,
        *,
        timeout: float,
        connect_timeout: float,
        backoff: tuple[float, float],
        publish: Publish,
    ) -> None:
        self.spec = spec
        self.state: State = "starting"
        self.reason: str | None = None
        self._tools = 0
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._publish = publish
        self._client: Client | None = None
        self._connection: Connection | None = None
        self._stop = asyncio.Event()
        self._started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def status(self) -> ServerStatus:
        return ServerStatus(self.spec.name, self.spec.kind, self.state, self.reason, self._tools)

    async def start(self) -> None:
        if self.spec.problem is not None:
            self._fail(self.spec.problem)
            return
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.spec.name}")
        await self._started.wait()

    async def aclose(self) -> None:
        self._stop.set()
        if self._connection is not None:
            self._connection.wake.set()
        task = self._task
        if task is None or task.done():
            return
        # Leaving a connection closes the server's stdin and waits for it (the SDK's bounded
        # shutdown); only a connection still being opened is cut short.
        done, _ = await asyncio.wait({task}, timeout=10)
        if not done:
            task.cancel()
            await asyncio.wait({task})

    # ---- calls --------------------------------------------------------------------------
    async def call(self, tool: str, remote: str, arguments: dict[str, Any]) -> ToolResult:
        client = self._client
        if client is None:
            raise ToolError(self._unavailable())
        try:
            result = await client.call_tool(remote, arguments, read_timeout_seconds=self._timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise ToolTimeout(
                    f"{tool} did not finish within {self._timeout:g} s; the call was cancelled "
                    "on the server"
                ) from exc
            if exc.code == types.CONNECTION_CLOSED or self._client is not client:
                raise ToolError(self._unavailable("the connection closed")) from exc
            raise ToolError(f"{tool}: the server refused the call: {line(exc.message)}") from exc
        except (ValidationError, RuntimeError) as exc:
            if self._client is not client:
                raise ToolError(self._unavailable("the connection closed")) from exc
            raise ToolError(f"{tool}: the server's answer cannot be read ({line(exc)})") from exc
        return render_result(result)

    def _unavailable(self, reason: str | None = None) -> str:
        why = reason or self.reason or "not connected"
        return (
            f"the MCP server '{self.spec.name}' is unavailable ({why}); "
            "reactbot is restarting it, try again later or use another tool"
        )

    # ---- the supervisor -----------------------------------------------------------------
    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        failures = 0
        try:
            while not self._stop.is_set():
                began = loop.time()
                reason = await self._connect_once()
                if self._stop.is_set():
                    return
                if self.state == "starting":
                    self._fail(reason)
                    return
                self._down(reason)
                if loop.time() - began >= STABLE_SECONDS:
                    failures = 0
                first, cap = self._backoff
                delay = min(cap, first * 2**failures)
                failures += 1
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._stop.wait()
        finally:
            self._started.set()

    async def _connect_once(self) -> str:
        """One connection, from opening to its end; the reason it ended (or never began)."""
        connection = self._connection = Connection(self.spec.name)
        error: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._open(stack, connection)
                await self._serve(client, connection, stack)
        except Exception as exc:  # whatever ends a connection is a reason to report
            error = exc
        except BaseExceptionGroup as group:  # anyio's: a cancellation beside the real error
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being stopped
            error = group
        finally:
            self._client = None
            await connection.aclose()
        return self._scrub(self._reason(error, connection))

    async def _open(self, stack: contextlib.AsyncExitStack, connection: Connection) -> Client:
        transport = self.spec.transport
        raw: contextlib.AbstractAsyncContextManager[TransportStreams]
        if isinstance(transport, StdioServer):
            if transport.cwd is not None and not await anyio.Path(transport.cwd).is_dir():
                raise Refused(f"cwd {transport.cwd} is not a directory")
            params = StdioServerParameters(
                command=transport.command,
                args=list(transport.args),
                env=dict(transport.env),
                cwd=transport.cwd,
            )
            raw = stdio_client(params, errlog=await connection.stderr())
        else:
            http = httpx2.AsyncClient(
                headers=dict(transport.headers),
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [connection.http_response]},
            )
            await stack.enter_async_context(http)
            raw = streamable_http_client(transport.url, http_client=http)
        client = Client(
            watched(raw, connection.ended),
            message_handler=connection.on_message,
            client_info=CLIENT_INFO,
            cache=None,
        )
        try:
            async with asyncio.timeout(self._connect_timeout):
                await stack.enter_async_context(client)
        except TimeoutError:
            raise Refused(f"no answer within {self._connect_timeout:g} s") from None
        finally:
            connection.spawned()
        return client

    async def _serve(
        self, client: Client, connection: Connection, stack: contextlib.AsyncExitStack
    ) -> None:
        """List, publish, and wait: for a changed tool list (list again), the end of the
        connection, or the stop."""
        try:
            await self._listen(client, connection, stack)
            listed = await self._list(client, within=self._connect_timeout)
            while True:
                self._up(client, listed)
                while not (connection.over or connection.changed or self._stop.is_set()):
                    connection.wake.clear()
                    await connection.wake.wait()
                if connection.over or self._stop.is_set():
                    return
                connection.changed = False
                try:
                    listed = await self._list(client, within=self._timeout)
                except (MCPError, TimeoutError, ValidationError) as exc:
                    if connection.over:
                        return
                    log.warning(  # the tools it had stay, and the next change tries again
                        "MCP server %r: listing its tools again failed: %s", self.spec.name, exc
                    )
        finally:
            self._client = None  # before the SDK tears the connection down

    async def _listen(
        self, client: Client, connection: Connection, stack: contextlib.AsyncExitStack
    ) -> None:
        """On a 2026 connection a server sends ``tools/list_changed`` only to a client that
        subscribed (``subscriptions/listen``); earlier ones send it unasked. The stream also
        tells at once when an HTTP server goes away (else the next call finds out)."""
        capabilities = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            capabilities and capabilities.list_changed
        ):
            return
        try:
            async with asyncio.timeout(self._connect_timeout):
                events = await stack.enter_async_context(client.listen(tools_list_changed=True))
        except (MCPError, RuntimeError, TimeoutError) as exc:
            log.info("MCP server %r: no tool list updates (%s)", self.spec.name, exc)
            return
        watcher = asyncio.create_task(connection.watch(events))
        stack.push_async_callback(cancel, watcher)  # before the stream closes

    async def _list(self, client: Client, *, within: float) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        async with asyncio.timeout(within):
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    break
        return tools

    # ---- states -------------------------------------------------------------------------
    def _up(self, client: Client, listed: Sequence[types.Tool]) -> None:
        self._tools = self._publish(self.spec, listed, self)
        if self.state == "down":
            log.warning("MCP server %r is back (%d tools)", self.spec.name, self._tools)
        self.state, self.reason = "up", None
        self._client = client
        self._started.set()

    def _down(self, reason: str) -> None:
        if self.state == "up":
            log.warning("MCP server %r stopped (%s); restarting it", self.spec.name, reason)
        else:
            log.info("MCP server %r is still down (%s)", self.spec.name, reason)
        self.state, self.reason = "down", reason

    def _fail(self, reason: str) -> None:
        # Told to the operator once, by MCPTools.start's return (the App's start notes).
        log.info("MCP server %r did not start (%s); its tools are left out", self.spec.name, reason)
        self.state, self.reason = "failed", self._scrub(reason)
        self._started.set()

    # ---- reasons ------------------------------------------------------------------------
    def _reason(self, error: BaseException | None, connection: Connection) -> str:
        transport = self.spec.transport
        if isinstance(transport, HttpServer) and connection.http_status is not None:
            # The SDK turns an HTTP error into a generic MCP error; the status says more.
            status = connection.http_status
            check = " (check the headers_from credentials)" if status in (401, 403) else ""
            return f"{transport.url} answered HTTP {status}{check}"
        if error is None:
            reason = (
                "the server exited"
                if isinstance(transport, StdioServer)
                else "the connection closed"
            )
        else:
            reason = self._describe(leaf(error))
        last = connection.last_stderr()
        return f"{reason}; it said: {last}" if last else reason

    def _describe(self, error: BaseException) -> str:
        transport = self.spec.transport
        if isinstance(error, Refused):
            return str(error)
        if isinstance(error, TimeoutError):  # only connecting and the first listing get here
            return f"no answer within {self._connect_timeout:g} s"
        if isinstance(error, MCPError):
            if error.code == types.CONNECTION_CLOSED:
                return (
                    "the server exited"
                    if isinstance(transport, StdioServer)
                    else "the connection closed"
                )
            return f"{line(error.message)} (MCP error {error.code})"
        if isinstance(transport, StdioServer) and isinstance(error, OSError):
            if isinstance(error, FileNotFoundError):
                return f"command not found: {transport.command}"
            return f"cannot run {transport.command} ({error.strerror or error})"
        if isinstance(transport, HttpServer) and isinstance(
            error, httpx2.ConnectError | httpx2.ConnectTimeout
        ):
            return f"cannot connect to {transport.url}"
        text = line(error)
        return f"{type(error).__name__}: {text}" if text else type(error).__name__

    def _scrub(self, text: str) -> str:
        for secret in sorted(self.spec.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text
