"""Round trips per turn and Redis memory per conversation for ``RedisHistoryStore``.

Run: ``.venv/bin/python bench/redis_history.py`` (``REDIS_URL``, default 127.0.0.1:6379).
Each turn is one load and one append, as the agent does them. Round trips are counted at the
socket (one write per command or pipeline); memory is ``MEMORY USAGE`` of the history key.
Two stores: one keeping all 1000 turns, and the default one trimmed to the last 10 turns.
Keys live under a unique bench prefix and are deleted at the end.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterable

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from core.history import Message
from core.redis_store import DEFAULT_MAX_TURNS, RedisHistoryStore, create_client

CHECKPOINTS = (10, 1000)
QUESTION = "How far is the Moon from the Earth, and how long does light take to get there?"
ANSWER = (
    "On average about 384,400 km. Light covers that in about 1.28 seconds, so a laser pulse "
    "sent to the retroreflectors left by Apollo comes back after roughly 2.56 seconds. "
) * 2


class SocketWrites:
    """Counts calls to the connection's low-level send: one per round trip."""

    def __init__(self) -> None:
        self.count = 0
        self._original = AbstractConnection._send_packed_command

    def install(self) -> None:
        original = self._original

        async def counting(conn: AbstractConnection, command: Iterable[bytes]) -> None:
            self.count += 1
            await original(conn, command)

        AbstractConnection._send_packed_command = counting  # type: ignore[method-assign, assignment]

    def uninstall(self) -> None:
        AbstractConnection._send_packed_command = self._original  # type: ignore[method-assign]


def turn(i: int) -> tuple[Message, Message]:
    return {"role": "user", "content": f"{QUESTION} ({i})"}, {
        "role": "assistant",
        "content": ANSWER,
    }


async def run(
    client: aioredis.Redis, store: RedisHistoryStore, label: str, writes: SocketWrites
) -> None:
    """Grow one conversation to each checkpoint and print the figures for the turns run."""
    key = store.key("bench")
    done = 0
    for target in CHECKPOINTS:
        turns = target - done
        writes.count = 0
        started = time.perf_counter()
        for i in range(done, target):
            await store.load("bench")
            await store.append("bench", *turn(i))
        ms_per_turn = 1000 * (time.perf_counter() - started) / turns
        trips_per_turn = writes.count / turns
        done = target
        memory = await client.memory_usage(key) or 0
        length = await client.llen(key)
        print(
            f"{label:<22} {target:>6} {trips_per_turn:>10.1f} {ms_per_turn:>9.2f}"
            f" {length:>9} {memory:>13,}"
        )


async def main() -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"reactbot-bench:{uuid.uuid4().hex[:8]}:"
    client = create_client(url)
    writes = SocketWrites()
    try:
        await client.ping()  # connect first: the handshake is not part of a turn
        writes.install()
        print(
            f"{'store':<22} {'turns':>6} {'trips/turn':>10} {'ms/turn':>9} {'messages':>9}"
            f" {'MEMORY USAGE':>13}"
        )
        everything = RedisHistoryStore(client, prefix=prefix + "all:", max_turns=max(CHECKPOINTS))
        await run(client, everything, "max_turns=1000", writes)
        trimmed = RedisHistoryStore(client, prefix=prefix + "default:")
        await run(client, trimmed, f"max_turns={DEFAULT_MAX_TURNS} (default)", writes)
    finally:
        writes.uninstall()
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
