"""The hand-off between a run's task and its one consumer (``core.outbox.Outbox``)."""

from __future__ import annotations

import asyncio

from core.events import AnswerDelta, Notice, StepStarted, ThoughtDelta
from core.outbox import Outbox, TextRun


async def take_all(outbox: Outbox, until: type) -> list[object]:
    """Consume the way ``Run.events`` does, stopping after an event of type ``until``."""
    taken: list[object] = []
    while True:
        while not outbox.pending:
            await outbox.wait()
        item = outbox.pending.popleft()
        event = item.event() if isinstance(item, TextRun) else item
        taken.append(event)
        if isinstance(event, until):
            return taken


async def feed_text_one_per_turn(outbox: Outbox, pieces: list[str], step: int = 1) -> None:
    for piece in pieces:
        await asyncio.sleep(0)  # each chunk in its own loop turn, as from a socket
        outbox.emit_text(ThoughtDelta, step, piece)


async def test_text_of_many_loop_turns_reaches_a_waiting_consumer_in_one_wake() -> None:
    outbox = Outbox(text_latency=5.0)  # the Notice below wakes it: nothing waits that long
    consumer = asyncio.create_task(take_all(outbox, Notice))
    await asyncio.sleep(0)  # the consumer waits
    pieces = [f"piece {n} " for n in range(200)]
    await feed_text_one_per_turn(outbox, pieces)
    outbox.emit(Notice("info", "end"))
    taken = await consumer
    assert [type(e) for e in taken] == [ThoughtDelta, Notice]
    assert taken[0] == ThoughtDelta(1, "".join(pieces))


async def test_with_no_latency_each_chunk_wakes_the_consumer() -> None:
    outbox = Outbox(text_latency=0.0)
    consumer = asyncio.create_task(take_all(outbox, Notice))
    await asyncio.sleep(0)
    await feed_text_one_per_turn(outbox, ["a", "b", "c"])
    await asyncio.sleep(0)
    outbox.emit(Notice("info", "end"))
    taken = await consumer
    assert [getattr(e, "text", None) for e in taken] == ["a", "b", "c", "end"]


async def test_an_event_wakes_at_once_after_the_text_before_it() -> None:
    """The latency never holds back anything but text, nor reorders: a step that starts while
    text waits for its wake comes right after that text, without waiting out the latency."""
    outbox = Outbox(text_latency=60.0)
    consumer = asyncio.create_task(take_all(outbox, StepStarted))
    await asyncio.sleep(0)
    outbox.emit_text(ThoughtDelta, 1, "thinking")
    outbox.emit_text(AnswerDelta, 1, "answer")
    outbox.emit(StepStarted(2, 8))
    taken = await asyncio.wait_for(consumer, 1.0)  # not the 60 s latency
    assert taken == [ThoughtDelta(1, "thinking"), AnswerDelta(1, "answer"), StepStarted(2, 8)]


async def test_text_is_delivered_within_the_latency_when_nothing_follows() -> None:
    outbox = Outbox(text_latency=0.02)
    consumer = asyncio.create_task(take_all(outbox, ThoughtDelta))
    await asyncio.sleep(0)
    outbox.emit_text(ThoughtDelta, 1, "alone")
    taken = await asyncio.wait_for(consumer, 2.0)
    assert taken == [ThoughtDelta(1, "alone")]


async def test_a_consumer_that_stops_leaves_no_wake_scheduled() -> None:
    outbox = Outbox(text_latency=60.0)
    consumer = asyncio.create_task(outbox.wait())
    await asyncio.sleep(0)
    outbox.emit_text(ThoughtDelta, 1, "x")
    assert outbox._timer is not None
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    assert outbox._timer is None and outbox._waiter is None


async def test_a_busy_consumer_is_not_woken_and_takes_everything_when_it_returns() -> None:
    outbox = Outbox(text_latency=0.0)
    for n in range(5):
        outbox.emit_text(ThoughtDelta, 1, str(n))
    outbox.emit(Notice("info", "end"))
    # Nobody waited, so nobody was woken; the consumer finds all of it pending, merged.
    assert await asyncio.wait_for(take_all(outbox, Notice), 1.0) == [
        ThoughtDelta(1, "01234"),
        Notice("info", "end"),
    ]
