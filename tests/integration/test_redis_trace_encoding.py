"""Traces are stored compressed behind a format byte, read back whole, and a trace stored in
the older plain-JSON form still reads (get, list, recent) after the upgrade."""

from __future__ import annotations

import json
import time

import redis.asyncio as aioredis

from core.redis_store import TRACE_ZLIB, RedisStores, decode_trace, encode_trace
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
    assert raw[:1] == TRACE_ZLIB
    assert len(raw) * 3 < len(trace.to_json().encode())
    back = await stores.traces.get(trace.id)
    assert back is not None and back.to_dict() == trace.to_dict()
    assert [t.id for t in await stores.traces.list(trace.conversation)] == [trace.id]


async def test_a_trace_in_the_old_json_format_still_reads(stores: RedisStores) -> None:
    old = a_trace(started_at=time.time() - 10)
    key = f"{stores.traces._prefix}trace:{old.id}"
    await stores.client.set(key, old.to_json())  # how traces were stored before the format byte
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
