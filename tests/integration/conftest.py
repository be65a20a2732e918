"""Fixtures for the Redis store tests: stores on the shared server, a round-trip counter,
and a private ``redis-server`` that fault tests may kill and restart."""

from __future__ import annotations

import asyncio
import gc
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.stores.redis import RedisStores, connect


@pytest.fixture
async def stores(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStores]:
    opened = connect(redis_url, prefix=redis_prefix)
    await opened.ping()
    yield opened
    await opened.aclose()


@pytest.fixture
async def two_processes(redis_url: str, redis_prefix: str) -> AsyncIterator[list[RedisStores]]:
    """The stores of two replicas: each its own Redis client, one server and prefix."""
    opened = [connect(redis_url, prefix=redis_prefix) for _ in range(2)]
    yield opened
    for stores in opened:
        await stores.aclose()


@dataclass
class RoundTrips:
    """Counts writes to the socket: one per command, one per pipeline flush."""

    count: int = 0

    def reset(self) -> None:
        self.count = 0


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    from redis.asyncio.connection import AbstractConnection

    counter = RoundTrips()
    original = AbstractConnection.send_packed_command

    async def counting(
        self: AbstractConnection, command: Iterable[bytes], check_health: bool = True
    ) -> None:
        counter.count += 1
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return counter


async def cancellations_lost(client: Any, key: str, *, turns: int = 40) -> list[int]:
    """Cancel a ``SET`` of ``key`` after 1, 2, ... ``turns`` - 1 loop turns, each in turn:
    the turns after which the command returned normally though cancelled (none should:
    redis-py's own writes limit themselves with ``asyncio.wait_for``, which before Python
    3.12 loses a cancellation arriving as the write completes, CPython gh-86296)."""
    lost: list[int] = []
    for after in range(1, turns):

        async def command() -> bool:
            await client.set(key, "v", px=10_000)
            task = asyncio.current_task()
            return task is not None and task.cancelling() > 0  # returned though cancelled

        task = asyncio.create_task(command())
        for _ in range(after):
            await asyncio.sleep(0)
        task.cancel()
        try:
            if await task:
                lost.append(after)
        except asyncio.CancelledError:
            pass
    return lost


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RedisServer:
    """A ``redis-server`` with AOF on (fsync always) in its own directory and port."""

    binary: str
    directory: Path
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_until_ready()

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no final save; only what the AOF already holds."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=5)
            self.process = None

    def pause(self) -> None:
        """SIGSTOP: the port still accepts connections but nothing answers (a hung server)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def _wait_until_ready(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(binary=binary, directory=tmp_path)
    server.start()
    yield server
    if server.process is not None:
        server.resume()  # a stopped process ignores SIGKILL until continued on some kernels
        server.kill()
    # A connection to this server left open is this test's leak: collect it now, so its
    # ResourceWarning fails this test and not whichever test the collector happens to run in.
    gc.collect()
