"""The conversation's files on a real Redis: round trip, the history's TTL, clear, outage."""

from __future__ import annotations

import pytest

from core.errors import StoreUnavailable
from core.file_workers import FileReaders
from core.files import FileLimits, Incoming, ingest, passages_of
from core.stores.redis import connect


async def test_files_round_trip_with_the_history_ttl_and_clear(
    redis_url: str, redis_prefix: str
) -> None:
    stores = connect(redis_url, prefix=redis_prefix, history_ttl=4321)
    try:
        passages = passages_of("report.pdf", [(1, "Intro"), (2, "Warranty: 36 months")])
        await stores.files.add("discord:1", passages)
        await stores.files.add("discord:1", passages_of("n.md", [(None, "# H\n\nbody")]))
        loaded = await stores.files.load("discord:1")
        assert loaded == [*passages, *passages_of("n.md", [(None, "# H\n\nbody")])]
        key = f"{redis_prefix}files:discord:1"
        assert 4300 < await stores.client.ttl(key) <= 4321
        await stores.client.expire(key, 100)
        await stores.files.load("discord:1")  # used again: the conversation's TTL anew
        assert 4300 < await stores.client.ttl(key) <= 4321
        assert await stores.files.load("discord:2") == []
        await stores.client.rpush(key, "not json", '["x", "not a list", 3]')
        assert len(await stores.files.load("discord:1")) == len(loaded)  # junk skipped
        await stores.files.clear("discord:1")
        assert await stores.client.exists(key) == 0
    finally:
        await stores.aclose()


async def test_two_processes_share_the_room_left(
    redis_url: str, redis_prefix: str, readers: FileReaders
) -> None:
    one = connect(redis_url, prefix=redis_prefix)
    two = connect(redis_url, prefix=redis_prefix)
    limits = FileLimits(max_chars_per_conversation=30)

    def file(name: str, data: bytes) -> Incoming:
        async def fetch() -> bytes:
            return data

        return Incoming(name, len(data), "text/plain", name, fetch)

    try:
        first = await ingest(
            "c", [file("a.txt", b"a" * 20)], store=one.files, limits=limits, reader=readers
        )
        second = await ingest(
            "c", [file("b.txt", b"b" * 20)], store=two.files, limits=limits, reader=readers
        )
        assert first.indexed == ["a.txt"]
        assert second.indexed == [] and "room for 10 more" in second.refused[0]
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_dead_redis_is_store_unavailable() -> None:
    stores = connect("redis://127.0.0.1:1/0", timeout=0.2)
    try:
        with pytest.raises(StoreUnavailable, match="load the conversation's files"):
            await stores.files.load("c")
    finally:
        await stores.aclose()
