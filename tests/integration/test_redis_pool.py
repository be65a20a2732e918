"""More concurrent commands than the pool has connections wait for one instead of failing:
redis-py's default pool refuses the 101st at once ("Too many connections"), which under a
burst of conversations (bench/soak.py at 200) made the bot answer without memory."""

from __future__ import annotations

import asyncio

from core.history import Message
from core.stores.redis import MAX_CONNECTIONS, connect
from tests.integration.conftest import cancellations_lost


async def test_a_burst_beyond_the_pool_waits_instead_of_failing(
    redis_url: str, redis_prefix: str
) -> None:
    # a wait long enough for a loaded machine: what is tested is waiting, not its length
    stores = connect(redis_url, prefix=redis_prefix, timeout=10.0)
    turns = MAX_CONNECTIONS * 6

    async def one(n: int) -> list[Message]:
        await stores.history.append(f"c{n}", {"role": "user", "content": f"q{n}"})
        return await stores.history.load(f"c{n}")

    try:
        loaded = await asyncio.gather(*(one(n) for n in range(turns)))
    finally:
        await stores.aclose()
    assert [history[-1]["content"] for history in loaded] == [f"q{n}" for n in range(turns)]


async def test_a_command_cancelled_at_any_point_of_its_flight_is_cancelled(
    redis_url: str, redis_prefix: str
) -> None:
    """A cancellation is never lost in a command: redis-py limits each write with
    ``asyncio.wait_for``, which before Python 3.12 swallows a cancellation that arrives as
    the write completes, and the command returned as if nothing had happened (a lock's
    renewal then kept a finished run's conversation locked). Cancelled after each number of
    loop turns in turn, a command either ends cancelled or ends before the cancellation."""
    stores = connect(redis_url, prefix=redis_prefix)
    client = stores.client
    key = f"{redis_prefix}flight"
    await client.ping()  # connected: the flight is the command's own
    try:
        lost = await cancellations_lost(client, key)
    finally:
        await client.delete(key)
        await stores.aclose()
    assert lost == []
