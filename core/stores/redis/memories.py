"""``core.memories.MemoryStore`` on Redis: one hash per holder, kept without a TTL.

::

    {prefix}memories:{{person:slack:U1}}      HASH memory id -> its JSON; NO TTL, on purpose:
    {prefix}memories:{{channel:slack:T:C}}    a memory stays until someone forgets it

The holder is the key's hash tag, on one server as on a Redis Cluster, so whatever is added
to a holder later lies in the same slot. ``add`` checks the holder's count and writes in one
script, so two processes cannot both slip past the limit. Redis errors leave as
``StoreUnavailable`` (``StoreFull`` when Redis is out of memory), as for every store.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import cast

from core.memories import Holder, Memory, newest_first
from core.stores.redis.connection import DEFAULT_PREFIX, Client, _unavailable

KIND = "memories"
"""The key's kind: persistent on purpose (docs/operations.md, key lifetimes)."""

_ADD = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


def _tag(name: str) -> str:
    """``name`` safe inside a hash tag: a brace would end the tag early."""
    return name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


class RedisMemories:
    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix
        self._add = client.register_script(_ADD)

    def key(self, holder: Holder) -> str:
        return f"{self._prefix}{KIND}:{{{_tag(holder.key)}}}"

    async def add(self, memory: Memory, *, limit: int) -> Memory | None:
        key = self.key(memory.holder)
        with _unavailable(self._client, "keep a memory"):
            kept = await self._add(keys=[key], args=[memory.id, memory.to_json(), limit])
        if kept:
            return None
        oldest = await self.list(memory.holder)
        return oldest[-1] if oldest else memory

    async def list(self, *holders: Holder) -> builtins.list[Memory]:
        """One HGETALL per holder, in one pipeline (not a transaction: on a cluster the
        holders' hashes lie in other slots, and the pipeline takes a round trip per node)."""
        with _unavailable(self._client, "read memories"):
            async with self._client.pipeline(transaction=False) as pipe:
                for holder in holders:
                    pipe.hgetall(self.key(holder))
                hashes = cast(builtins.list[dict[str, str]], await pipe.execute())
        read = (Memory.from_json(v) for values in hashes for v in values.values())
        return newest_first(m for m in read if m is not None)

    async def delete(self, holder: Holder, ids: Sequence[str]) -> builtins.list[str]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        key = self.key(holder)
        with _unavailable(self._client, "forget memories"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hmget(key, wanted)
                pipe.hdel(key, *wanted)
                found, _ = await pipe.execute()
        return [i for i, v in zip(wanted, found, strict=True) if v is not None]

    async def clear(self, holder: Holder) -> int:
        key = self.key(holder)
        with _unavailable(self._client, "forget memories"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hlen(key)
                pipe.delete(key)
                count, _ = await pipe.execute()
        return int(count)
