"""What the traces take in Redis is bounded (issue 26): at most ``redis.max_traces`` of them
(the oldest deleted, with its index entry, as a new one is saved) and each in at most
``redis.max_trace_bytes`` after compression, its longest tool results cut and the cut said;
the trace in memory, from which the thread's attachment is made, keeps them whole."""

from __future__ import annotations

import base64
import random
import re
import time

import redis.asyncio as aioredis

from core.stores.redis import (
    CUT_NOTE,
    DEFAULT_MAX_TRACE_BYTES,
    RedisStores,
    RedisTraceStore,
    decode_trace,
    encode_trace,
)
from core.trace import Trace, TraceAttachment, TraceStep

CUT = re.compile(r"… \[cut: ([\d,]+) characters; the whole result is in the thread's attachment\]$")


def noise(chars: int, seed: int = 7) -> str:
    """Text that hardly compresses (base64 of random bytes), as a big binary-ish tool result."""
    raw = random.Random(seed).randbytes(chars * 3 // 4 + 3)
    return base64.b64encode(raw).decode()[:chars]


def a_trace(
    *observations: str, started_at: float = 0.0, conversation: str = "slack:T:C:1"
) -> Trace:
    steps = [
        TraceStep(index=i, thought=f"step {i}", action="fetch", action_input="x", observation=o)
        for i, o in enumerate(observations, start=1)
    ]
    steps.append(TraceStep(index=len(steps) + 1, kind="final", thought="done"))
    return Trace(
        "what is in it?",
        conversation=conversation,
        started_at=started_at or time.time(),
        steps=steps,
        answer="this",
        status="answered",
    )


async def stored_bytes(stores: RedisStores, trace_id: str) -> bytes | None:
    raw: bytes | None = await aioredis.Redis(
        connection_pool=stores.client.connection_pool
    ).execute_command("GET", f"{stores.traces._prefix}trace:{trace_id}", NEVER_DECODE=True)
    return raw


async def test_a_10_mb_tool_result_is_stored_cut_within_the_bound(stores: RedisStores) -> None:
    whole = noise(10_000_000)
    trace = a_trace("short result", whole)
    before = trace.to_json()
    await stores.traces.save(trace)

    raw = await stored_bytes(stores, trace.id)
    assert raw is not None and DEFAULT_MAX_TRACE_BYTES // 2 < len(raw) <= DEFAULT_MAX_TRACE_BYTES
    back = await stores.traces.get(trace.id)
    assert back is not None
    cut = back.steps[1].observation
    assert cut is not None
    found = CUT.search(cut)
    assert found is not None, cut[-200:]
    kept = cut[: found.start()]
    assert whole.startswith(kept) and len(kept) > 100_000
    assert int(found.group(1).replace(",", "")) == len(whole) - len(kept)
    assert back.steps[0].observation == "short result"  # only what had to be cut is
    assert back.answer == "this" and back.status == "answered"
    # The run's own trace, which the platforms attach to the thread, still holds it whole.
    assert trace.to_json() == before and trace.steps[1].observation == whole


async def test_the_longest_result_is_cut_first_and_no_more_than_needed() -> None:
    big, middle = noise(3_000_000, seed=1), noise(200_000, seed=2)
    trace = a_trace(middle, big)
    back = decode_trace(encode_trace(trace, max_bytes=1_000_000))
    assert back.steps[0].observation == middle
    assert back.steps[1].observation is not None and CUT.search(back.steps[1].observation)


async def test_a_trace_within_the_bound_is_stored_as_before() -> None:
    trace = a_trace("the Moon is 384,400 km away " * 100)
    assert encode_trace(trace, max_bytes=4096) == encode_trace(trace)
    assert decode_trace(encode_trace(trace, max_bytes=4096)).to_dict() == trace.to_dict()


async def test_attachment_data_goes_when_cutting_results_is_not_enough() -> None:
    trace = a_trace("small")
    data = noise(2_000_000, seed=3)
    trace.steps[0].attachments.append(TraceAttachment("image/png", 1_500_000, data, "plot.png"))
    encoded = encode_trace(trace, max_bytes=100_000)
    assert len(encoded) <= 100_000
    attachment = decode_trace(encoded).steps[0].attachments[0]
    assert attachment.data is None and attachment.size == 1_500_000
    assert "not kept" in attachment.describe()
    assert trace.steps[0].attachments[0].data == data


async def test_beyond_max_traces_the_oldest_go_with_their_index_entries(
    stores: RedisStores, redis_prefix: str
) -> None:
    bounded = RedisTraceStore(stores.client, prefix=redis_prefix, max_traces=3)
    now = time.time()
    traces = [a_trace(f"result {i}", started_at=now - 100 + i) for i in range(5)]
    for trace in traces:
        await bounded.save(trace)

    kept = [t.id for t in traces[2:]]
    assert [t.id for t in await bounded.recent(limit=10)] == kept[::-1]
    assert await stores.client.zcard(f"{redis_prefix}recent-traces") == 3
    for gone in traces[:2]:
        assert await bounded.get(gone.id) is None
        assert not await stores.client.exists(f"{redis_prefix}trace:{gone.id}")
    assert [t.id for t in await bounded.list(traces[0].conversation)] == kept[::-1]


async def test_max_traces_0_keeps_every_trace(stores: RedisStores, redis_prefix: str) -> None:
    unbounded = RedisTraceStore(stores.client, prefix=redis_prefix, max_traces=0)
    now = time.time()
    traces = [a_trace(f"result {i}", started_at=now - 100 + i) for i in range(5)]
    for trace in traces:
        await unbounded.save(trace)
    for trace in traces:
        assert await unbounded.get(trace.id) is not None


def test_the_cut_note_names_the_thread_attachment() -> None:
    assert CUT.fullmatch(CUT_NOTE.format(cut=1_234)) is not None
