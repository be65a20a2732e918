"""One MCP connection's plumbing, for ``core.tools.mcp``'s supervisor (``_Link``).

``Connection`` is what a supervisor waits on (its end, a changed tool list, the last HTTP
error status, a stdio server's stderr tail); ``watched`` wraps a transport so that the end of
its read stream is seen (``EofWatch``: for a stdio server the SDK's only sign that the
process is gone); ``leaf`` digs the real error out of anyio's exception groups; ``line``
makes any text one bounded line for a log or a status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp.client.subscriptions import Subscription, SubscriptionLost

from core.errors import ReactbotError

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

log = logging.getLogger("core.tools.mcp")

STDERR_LINES = 20
"""Lines of a stdio server's stderr kept, to say why it stopped."""


class Refused(ReactbotError):
    """A server that cannot even be tried, with the reason."""


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task})


def leaf(error: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups (cancellations are only echoes)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if not isinstance(inner, asyncio.CancelledError | anyio.get_cancelled_exc_class()):
                return leaf(inner)
        return leaf(error.exceptions[0])
    return error


def line(value: object, limit: int = 300) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Connection:
    """What one connection's supervisor waits on: ``wake`` is set when it ended, when the
    server's tool list changed, or for the stop."""

    def __init__(self, server: str) -> None:
        self.wake = asyncio.Event()
        self.over = False
        self.changed = False
        self.http_status: int | None = None
        """The last HTTP error status the server answered, if any."""
        self._stderr: StderrTail | None = None
        self._server = server

    def ended(self) -> None:
        self.over = True
        self.wake.set()

    async def on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed = True
            self.wake.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %r: transport: %s", self._server, line(message))

    async def http_response(self, response: httpx2.Response) -> None:
        status = response.status_code
        if status < 400:
            self.http_status = None
        elif status != 405:  # 405: the server offers no GET stream, which is allowed
            self.http_status = status

    async def watch(self, events: Subscription) -> None:
        try:
            async for _ in events:
                self.changed = True
                self.wake.set()
        except SubscriptionLost:
            self.ended()

    async def stderr(self) -> TextIO:
        self._stderr = StderrTail(self._server)
        await self._stderr.start()
        return self._stderr.errlog

    def spawned(self) -> None:
        if self._stderr is not None:
            self._stderr.spawned()

    def last_stderr(self) -> str | None:
        return self._stderr.last() if self._stderr is not None else None

    async def aclose(self) -> None:
        if self._stderr is not None:
            await self._stderr.aclose()


class StderrTail:
    """A stdio server's stderr: each line logged at debug level, the last few kept for the
    reason it stopped. A pipe the event loop reads, so a chatty server never blocks on it
    and nothing it writes reaches the terminal."""

    def __init__(self, server: str) -> None:
        self._server = server
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "rb")
        self.errlog: TextIO = os.fdopen(write_fd, "w")
        self._lines: deque[str] = deque(maxlen=STDERR_LINES)
        self._task: asyncio.Task[None] | None = None
        self._transport: asyncio.ReadTransport | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader()
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), self._reader
        )
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        pending = b""
        while chunk := await stream.read(4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            pending = pending[-4096:]  # a line without end is kept short
            for raw in lines:
                self._keep(raw)
        self._keep(pending)

    def _keep(self, raw: bytes) -> None:
        text = line(raw.decode("utf-8", errors="replace"), 500)
        if text:
            self._lines.append(text)
            log.debug("MCP server %r: %s", self._server, text)

    def spawned(self) -> None:
        """The child has its copy of the write end; ours must go, or the pipe never ends."""
        if not self.errlog.closed:
            self.errlog.close()

    def last(self) -> str | None:
        # The last line, unless it is a frame of a boxed traceback (then the closest one
        # that says something).
        for said in reversed(self._lines):
            if re.search(r"[A-Za-z0-9]", said):
                return said
        return None

    async def aclose(self) -> None:
        self.spawned()
        if self._task is not None:
            # Whatever the server wrote before it exited is still in the pipe.
            done, _ = await asyncio.wait({self._task}, timeout=0.5)
            if not done:
                self._task.cancel()
                await asyncio.wait({self._task})
        if self._transport is not None:
            self._transport.close()
        elif not self._reader.closed:
            self._reader.close()


@contextlib.asynccontextmanager
async def watched(
    transport: contextlib.AbstractAsyncContextManager[TransportStreams],
    on_end: Callable[[], None],
) -> AsyncIterator[TransportStreams]:
    """The transport, its read stream watched for its end."""
    async with transport as (read, write):
        yield EofWatch(read, on_end), write


class EofWatch:
    """A transport's read stream that calls ``on_end`` when it ends: for a stdio server the
    SDK's only sign that the process is gone."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> EofWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> EofWatch:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result
