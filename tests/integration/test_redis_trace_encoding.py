"""Traces are stored compressed behind a format byte, read back whole, and a trace stored in
an older form (plain JSON, or zlib without the dictionary) still reads (get, list, recent)
after the upgrade. So do history messages and search results stored before they were packed."""

from __future__ import annotations

import json
import time
import zlib

import pytest
import redis.asyncio as aioredis

from core.stores.codec import ZLIB_DICT
from core.stores.redis import (
    TRACE_FORMAT,
    TRACE_ZLIB,
    RedisStores,
    decode_trace,
    encode_trace,
)
from core.tools import ToolResult
from core.tools.search import RedisSearchCache
from core.trace import Trace, TraceStep


def a_trace(conversation: str = "slack:T1:C1:1.0", started_at: float = 0.0) -> Trace:
    started_at = started_at or time.time()
    observation = "Results: " + "the Moon is about 384,400 km away; light takes 1.28 s. " * 60
    steps = [
        TraceStep(
            index=1,
            thought="I should search.",
            action="search",
            action_input="moon distance",
            observation=observation,
            raw="Thought: I should search.\nAction: search[moon distance]",
            prompt_tokens=1200,
            completion_tokens=40,
        ),
        TraceStep(index=2, kind="final", thought="Done.", raw="Final Answer: 1.28 s, 月球"),
    ]
    return Trace(
        "How far is the Moon? 🌕",
        conversation=conversation,
        started_at=started_at,
        ended_at=started_at + 2,
        steps=steps,
        answer="About 384,400 km; light takes 1.28 s. 月球",
        status="answered",
    )


async def test_a_stored_trace_is_compressed_and_reads_back_whole(stores: RedisStores) -> None:
    trace = a_trace()
    await stores.traces.save(trace)
    raw = await aioredis.Redis(connection_pool=stores.client.connection_pool).execute_command(
        "GET", f"{stores.traces._prefix}trace:{trace.id}", NEVER_DECODE=True
    )
    assert raw[:1] == TRACE_FORMAT
    assert len(raw) * 3 < len(trace.to_json().encode())
    back = await stores.traces.get(trace.id)
    assert back is not None and back.to_dict() == trace.to_dict()
    assert [t.id for t in await stores.traces.list(trace.conversation)] == [trace.id]


@pytest.mark.parametrize("form", ["json", "zlib"])
async def test_a_trace_in_an_older_format_still_reads(stores: RedisStores, form: str) -> None:
    old = a_trace(started_at=time.time() - 10)
    key = f"{stores.traces._prefix}trace:{old.id}"
    # How traces were stored before the format byte, and then before the dictionary.
    value = old.to_json() if form == "json" else TRACE_ZLIB + zlib.compress(old.to_json().encode())
    await stores.client.set(key, value)
    await stores.client.zadd(
        f"{stores.traces._prefix}traces:{old.conversation}", {old.id: old.started_at}
    )
    new = a_trace()
    await stores.traces.save(new)
    got = await stores.traces.get(old.id)
    assert got is not None and got.to_dict() == old.to_dict()
    listed = await stores.traces.list(old.conversation)
    assert [t.id for t in listed] == [new.id, old.id]
    assert listed[1].to_dict() == old.to_dict()


def test_encoding_round_trips_and_reads_plain_json() -> None:
    trace = a_trace()
    assert decode_trace(encode_trace(trace)).to_dict() == trace.to_dict()
    assert decode_trace(trace.to_json()).to_dict() == trace.to_dict()
    assert json.loads(trace.to_json())["id"] == trace.id


async def test_history_is_stored_packed_and_old_plain_messages_still_read(
    stores: RedisStores,
) -> None:
    conversation = "slack:T1:C1:2.0"
    key = stores.history.key(conversation)
    answer = "The Moon is on average 384,400 km away; its light takes about 1.28 s. " * 4
    old = [
        {"role": "user", "content": "Question: an old one"},
        {"role": "assistant", "content": "An old answer, stored as plain JSON. " * 5},
    ]
    await stores.client.rpush(key, *[json.dumps(m) for m in old])  # before packing
    await stores.history.append(
        conversation,
        {"role": "user", "content": "How far?"},
        {"role": "assistant", "content": answer},
    )
    raw = await aioredis.Redis(connection_pool=stores.client.connection_pool).execute_command(
        "LRANGE", key, 0, -1, NEVER_DECODE=True
    )
    assert raw[2][:1] == b"{"  # a short message gains nothing packed: it stays text
    assert raw[3][:1] == ZLIB_DICT and len(raw[3]) < len(answer) * 0.6
    assert await stores.history.load(conversation) == [
        *old,
        {"role": "user", "content": "How far?"},
        {"role": "assistant", "content": answer},
    ]
    assert 0 < await stores.client.ttl(key) <= 7 * 86400


async def test_search_results_are_cached_packed_and_old_entries_still_read(
    stores: RedisStores, redis_prefix: str
) -> None:
    cache = RedisSearchCache(stores.client, prefix=f"{redis_prefix}search:")
    result = ToolResult("1. The Moon - Wikipedia\n   https://en.wikipedia.org/wiki/Moon " * 9)
    await cache.set("new", result, ttl=60)
    raw = await aioredis.Redis(connection_pool=stores.client.connection_pool).execute_command(
        "GET", f"{redis_prefix}search:new", NEVER_DECODE=True
    )
    assert raw[:1] == ZLIB_DICT and len(raw) < len(result.text) / 2
    assert await cache.get("new") == result  # through a client that decodes replies as text
    old = json.dumps({"text": "older entry", "sources": ["https://a.example"]})
    await stores.client.set(f"{redis_prefix}search:old", old)
    assert await cache.get("old") == ToolResult("older entry", ("https://a.example",))
