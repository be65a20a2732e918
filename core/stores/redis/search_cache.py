"""The search tool's cache on Redis: results shared by every process, packed, with a TTL
(``{prefix}search:{query hash}`` in ``core.stores.redis``'s key table)."""

from __future__ import annotations

import json

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.client import NEVER_DECODE

from core.stores.codec import pack, unpack
from core.tools import ToolResult


class RedisSearchCache:
    """Search results shared by every bot process on one Redis, as JSON with a TTL, packed
    (``core.stores.codec``: about half the size; entries stored as plain JSON before still read).

    Errors from Redis propagate; ``SearchTool`` treats any cache failure as a miss.
    """

    def __init__(self, client: Redis | RedisCluster, prefix: str = "reactbot:search:") -> None:
        self._client = client
        self._prefix = prefix

    async def get(self, key: str) -> ToolResult | None:
        command = self._client.execute_command  # bytes: the client may decode replies as text
        raw = await command("GET", self._prefix + key, **{NEVER_DECODE: True})
        return None if raw is None else _decode_result(raw)

    async def set(self, key: str, value: ToolResult, ttl: float) -> None:
        ttl_ms = int(ttl * 1000)
        if ttl_ms <= 0:
            return
        entry = {"text": value.text, "sources": list(value.sources)}
        payload = pack(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
        await self._client.set(self._prefix + key, payload, px=ttl_ms)


def _decode_result(raw: bytes | str) -> ToolResult | None:
    """A cached entry, packed or plain JSON, or None when it is not one we wrote (then it is
    simply a miss)."""
    try:
        data = json.loads(unpack(raw))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    text, sources = data.get("text"), data.get("sources")
    if not isinstance(text, str) or not isinstance(sources, list):
        return None
    if not all(isinstance(url, str) for url in sources):
        return None
    return ToolResult(text=text, sources=tuple(sources))
