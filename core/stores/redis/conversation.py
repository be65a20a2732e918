"""What belongs to one conversation on Redis: its history, its lock, the files attached in it
and the tools allowed in it (keys in ``core.stores.redis``'s table).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import (
    asynccontextmanager,
)
from typing import Any, cast

from core.errors import StoreUnavailable
from core.llm import Message
from core.stores.codec import pack, unpack
from core.stores.protocols import (
    DEFAULT_LOCK_LEASE,
    OnWait,
)
from core.stores.redis.connection import (
    DEFAULT_HISTORY_TTL,
    DEFAULT_MAX_TURNS,
    DEFAULT_PREFIX,
    Client,
    _RedisBase,
    _undecoded,
)
from core.stores.waiting import notify_wait, renewing
from core.tools.lookup import Passage

log = logging.getLogger(__name__)


_MESSAGE_KEYS = ("role", "content")
_ROLES = frozenset({"system", "user", "assistant"})

# Deletes the lock only if it still holds our token: after our lease expired, another run
# may own it, and a plain DEL would release *their* lock.
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

# Extends the lease only while the lock still holds our token.
_RENEW_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


# ---- history ------------------------------------------------------------------------------


class RedisHistoryStore(_RedisBase):
    """``core.stores.HistoryStore`` on a Redis list: one round trip to load, one to append.

    With ``store_steps`` the extra keys a message carries (e.g. ``steps``, a compact form of
    the run's steps) are stored too; otherwise only role and content are kept.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_turns: int = DEFAULT_MAX_TURNS,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
        store_steps: bool = False,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._max_messages = max_turns * 2
        self._ttl = ttl_seconds
        self._store_steps = store_steps

    def key(self, conversation: str) -> str:
        return self._tagged("history", conversation)

    async def load(self, conversation: str) -> list[Message]:
        with self._unavailable("load history"):
            raw = cast(
                list[bytes],
                await _undecoded(self._client, "LRANGE", self.key(conversation), "0", "-1"),
            )
        return [m for m in map(_decode_message, raw) if m is not None]

    async def append(self, conversation: str, *messages: Message) -> None:
        if messages:
            await self._write(conversation, messages, replace=False)

    async def replace(self, conversation: str, messages: Sequence[Message]) -> None:
        """Swap the whole conversation atomically (used to store a summary)."""
        await self._write(conversation, messages, replace=True)

    async def clear(self, conversation: str) -> None:
        with self._unavailable("clear history"):
            await self._client.delete(self.key(conversation))

    async def _write(
        self, conversation: str, messages: Sequence[Message], *, replace: bool
    ) -> None:
        key = self.key(conversation)
        encoded = [self._encode(m) for m in messages]
        # MULTI/EXEC: the write, the trim and the TTL refresh land together in one round trip.
        with self._unavailable("save history"):
            async with self._client.pipeline(transaction=True) as pipe:
                if replace:
                    pipe.delete(key)
                if encoded:
                    pipe.rpush(key, *encoded)
                    pipe.ltrim(key, -self._max_messages, -1)
                    pipe.expire(key, self._ttl)
                await pipe.execute()

    def _encode(self, message: Message) -> str | bytes:
        """A message's compact JSON, packed (``core.stores.codec``) when that makes it smaller: an
        answer of a few hundred characters takes about half, a short question stays text."""
        data: dict[str, Any] = dict(message)
        if not self._store_steps:
            data = {k: data[k] for k in _MESSAGE_KEYS}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if len(text) < PACK_MESSAGES_FROM:
            return text
        packed = pack(text)
        return packed if len(packed) < len(text.encode()) else text


PACK_MESSAGES_FROM = 96
"""Characters of a message's JSON from which it is stored packed (shorter ones gain nothing)."""


def _decode_message(raw: bytes | str) -> Message | None:
    """Parse one stored message, packed or plain JSON (as messages were stored before);
    entries that are not messages are skipped, not fatal."""
    try:
        data = json.loads(unpack(raw))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("role") not in _ROLES:
        return None
    if not isinstance(data.get("content"), str):
        return None
    return cast(Message, data)


# ---- locks --------------------------------------------------------------------------------


class RedisLocks(_RedisBase):
    """A lease lock per conversation, shared by every process on this Redis.

    ``SET NX PX`` with a random token; released by a compare-and-delete script. A crashed
    holder blocks its conversation for at most ``lease_seconds``; a live one renews the lease
    every third of it (compare-and-``PEXPIRE``) for up to ``hold_at_most``, so a run may
    outlast the lease (a person deciding on an approval pauses the run's deadline). Waiters
    poll with a short exponential backoff.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        lease_seconds: float = DEFAULT_LOCK_LEASE,
        hold_at_most: float | None = None,
        poll_min: float = 0.02,
        poll_max: float = 0.25,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._lease_ms = int(lease_seconds * 1000)
        self._hold_at_most = max(lease_seconds, hold_at_most or lease_seconds)
        """The longest a live holder keeps the lock by renewing it (a longest healthy run)."""
        self._poll_min = poll_min
        self._poll_max = poll_max
        self._release_script = client.register_script(_RELEASE_LUA)
        self._renew_script = client.register_script(_RENEW_LUA)
        self._releasing: set[asyncio.Task[None]] = set()
        """Releases retried in the background (``_release_soon``)."""

    @asynccontextmanager
    async def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AsyncIterator[None]:
        key = self._tagged("lock", conversation)
        token = secrets.token_hex(16)
        await self._acquire(key, token, on_wait)
        try:
            async with renewing(
                lambda: self._renew(key, token),
                every=self._lease_ms / 3000,
                until=self._hold_at_most - self._lease_ms / 1000,
                what=f"the lock of {conversation}",
            ):
                yield
        finally:
            await self._release(key, token)

    async def _renew(self, key: str, token: str) -> None:
        with self._unavailable("renew the conversation lock"):
            await self._renew_script(keys=[key], args=[token, self._lease_ms])

    async def _acquire(self, key: str, token: str, on_wait: OnWait | None) -> None:
        if await self._try_set(key, token):
            return
        await notify_wait(on_wait)
        delay = self._poll_min
        # Terminates: the holder releases, or its lease expires.
        while not await self._try_set(key, token):
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._poll_max)

    async def _try_set(self, key: str, token: str) -> bool:
        try:
            with self._unavailable("take the conversation lock"):
                return bool(await self._client.set(key, token, nx=True, px=self._lease_ms))
        except StoreUnavailable:
            # A reply that timed out may hide a SET that took: the lock would then block the
            # conversation for a whole lease. Our token is ours alone, so deleting it is safe.
            self._release_soon(key, token)
            raise

    async def _release_once(self, key: str, token: str) -> None:
        with self._unavailable("release the conversation lock"):
            await self._release_script(keys=[key], args=[token])

    async def _release(self, key: str, token: str) -> None:
        try:
            await self._release_once(key, token)
        except StoreUnavailable:
            # Failing here would hide the run's own outcome; the next question in this
            # conversation would wait out the lease: try again in the background.
            self._release_soon(key, token)

    RELEASE_RETRIES = (0.2, 1.0, 3.0, 10.0)
    """Seconds before each background attempt to release a lock (then the lease decides)."""

    def _release_soon(self, key: str, token: str) -> None:
        async def retry() -> None:
            for pause in self.RELEASE_RETRIES:
                await asyncio.sleep(pause)
                try:
                    await self._release_once(key, token)
                except StoreUnavailable:
                    continue
                return
            log.warning("a conversation lock was not released; its lease will free it")

        task = asyncio.get_running_loop().create_task(retry())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)


class RedisAllowances(_RedisBase):
    """``{prefix}allow:{conversation}``, a HASH tool -> who allowed it, with the history's TTL
    (an allowance lasts as long as the conversation it belongs to)."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds

    async def allowed(self, conversation: str, tool: str) -> str | None:
        with self._unavailable("read the allowances"):
            by = await self._client.hget(self._tagged("allow", conversation), tool.lower())
        return str(by) if by is not None else None

    async def allow(self, conversation: str, tool: str, *, by: str) -> None:
        key = self._tagged("allow", conversation)
        with self._unavailable("store the allowance"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(key, tool.lower(), by)
                pipe.expire(key, self._ttl)
                await pipe.execute()


class RedisFileStore(_RedisBase):
    """``core.stores.FileStore``: ``{prefix}files:{conversation}``, a LIST of JSON passages
    with the history's TTL (the files last as long as the conversation they belong to)."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds

    def key(self, conversation: str) -> str:
        return self._tagged("files", conversation)

    async def load(self, conversation: str) -> builtins.list[Passage]:
        """The passages, and the TTL renewed: files live as long as the conversation is used."""
        key = self.key(conversation)
        with self._unavailable("load the conversation's files"):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.lrange(key, 0, -1)
                pipe.expire(key, self._ttl)
                raw, _ = await pipe.execute()
        return [p for p in map(_decode_passage, cast(builtins.list[str], raw)) if p is not None]

    async def add(self, conversation: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        key = self.key(conversation)
        encoded = [
            json.dumps([p.file, list(p.headings), p.text], ensure_ascii=False) for p in passages
        ]
        with self._unavailable("store the conversation's files"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *encoded)
                pipe.expire(key, self._ttl)
                await pipe.execute()

    async def clear(self, conversation: str) -> None:
        with self._unavailable("drop the conversation's files"):
            await self._client.delete(self.key(conversation))


def _decode_passage(raw: str) -> Passage | None:
    try:
        file, headings, text = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not (isinstance(file, str) and isinstance(text, str) and isinstance(headings, list)):
        return None
    return Passage(file, tuple(str(h) for h in headings), text)
